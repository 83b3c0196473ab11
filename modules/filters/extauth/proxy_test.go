package extauth_test

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/coxswain-labs/coxswain/modules/filters/extauth"
	"github.com/coxswain-labs/coxswain/modules/grpcroute/grpctest"
)

func httpCfg(allowed ...string) extauth.Config {
	return extauth.Config{Name: "ns/auth", Spec: extauth.Spec{Protocol: extauth.ProtocolHTTP,
		BackendRef: extauth.BackendRef{Name: "ext", Port: 9000}, AllowedResponseHeaders: allowed}}
}

func grpcCfg(allowed ...string) extauth.Config {
	c := httpCfg(allowed...)
	c.Protocol = extauth.ProtocolGRPC
	return c
}

// TestHTTPAllow: the auth service sees the request's method, Host, path, query and headers (no
// body) with X-Forwarded-*; its 2xx lets the request through with exactly the allowed headers,
// replacing what the client forged.
func TestHTTPAllow(t *testing.T) {
	auth := startRecorder(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("X-User", "alice")
		w.Header().Set("X-Other", "nope")
		w.WriteHeader(http.StatusNoContent)
	})
	e := startEnv(t, httpCfg("x-user"), []uint32{auth.port}, false, 0)
	req, _ := http.NewRequest(http.MethodPost, e.url+"/a/b%2Fc?q=1&r=2", strings.NewReader("secret body"))
	req.Host = "app.example"
	req.Header.Set("Authorization", "Bearer t")
	req.Header.Set("X-User", "admin")
	resp, body := e.do(t, req)
	if resp.StatusCode != 200 || string(body) != "ok" {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
	seen := auth.take()
	if len(seen) != 1 {
		t.Fatalf("auth saw %d requests", len(seen))
	}
	a := seen[0]
	if a.Method != http.MethodPost || a.RequestURI != "/a/b%2Fc?q=1&r=2" || a.Host != "app.example" ||
		a.Header.Get("Authorization") != "Bearer t" || a.ContentLength != 0 {
		t.Errorf("auth request %s %s host %s len %d %v", a.Method, a.RequestURI, a.Host, a.ContentLength, a.Header)
	}
	if a.Header.Get("X-Forwarded-For") != "127.0.0.1" || a.Header.Get("X-Forwarded-Proto") != "http" || a.Header.Get("X-Forwarded-Host") != "app.example" {
		t.Errorf("auth X-Forwarded-* %v", a.Header)
	}
	up := e.backend.take()
	if len(up) != 1 {
		t.Fatalf("backend saw %d", len(up))
	}
	if got := up[0].Header.Values("X-User"); len(got) != 1 || got[0] != "alice" {
		t.Errorf("upstream X-User %q", got)
	}
	if up[0].Header.Get("X-Other") != "" {
		t.Errorf("a header not allowed reached the upstream")
	}
}

// TestHTTPDeny: a 401 goes back to the client with its challenge and body; the upstream sees
// nothing.
func TestHTTPDeny(t *testing.T) {
	auth := startRecorder(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="x"`)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error":"login"}`))
	})
	e := startEnv(t, httpCfg(), []uint32{auth.port}, false, 0)
	resp, body := e.get(t, "/x")
	if resp.StatusCode != 401 || string(body) != `{"error":"login"}` ||
		resp.Header.Get("WWW-Authenticate") != `Bearer realm="x"` || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("%d %v %q", resp.StatusCode, resp.Header, body)
	}
	if up := e.backend.take(); len(up) != 0 {
		t.Errorf("backend saw %d requests", len(up))
	}
	if got := checks(t, e, "denied"); got != 1 {
		t.Errorf("denied count %v", got)
	}
}

// TestHTTPFailures: an auth service past the timeout or down answers 503 when failing closed
// and lets the request through when not; an auth 5xx is a failure too.
func TestHTTPFailures(t *testing.T) {
	slow := startRecorder(t, func(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	broken := startRecorder(t, func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(500) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := portOf(ln.Addr())
	_ = ln.Close()
	for _, tc := range []struct {
		name string
		port uint32
	}{{"slow", slow.port}, {"down", down}, {"5xx", broken.port}} {
		for _, closed := range []bool{true, false} {
			cfg := httpCfg()
			cfg.Timeout = "50ms"
			cfg.FailClosed = &closed
			e := startEnv(t, cfg, []uint32{tc.port}, false, 0)
			resp, body := e.get(t, "/x")
			want := 503
			if !closed {
				want = 200
			}
			if resp.StatusCode != want {
				t.Errorf("%s failClosed=%v: %d %q, want %d", tc.name, closed, resp.StatusCode, body, want)
			}
			if got := checks(t, e, "error"); got != 1 {
				t.Errorf("%s: error count %v", tc.name, got)
			}
		}
	}
}

// TestAlways503: no ready endpoint and an unresolved backend are 503 even with failClosed false.
func TestAlways503(t *testing.T) {
	open := false
	for name, cfg := range map[string]extauth.Config{
		"no endpoints": func() extauth.Config { c := httpCfg(); c.FailClosed = &open; return c }(),
		"unresolved": func() extauth.Config {
			c := grpcCfg()
			c.FailClosed, c.Unresolved = &open, "Service ns/ext does not exist"
			return c
		}(),
	} {
		e := startEnv(t, cfg, nil, false, 0)
		if resp, body := e.get(t, "/x"); resp.StatusCode != 503 {
			t.Errorf("%s: %d %q", name, resp.StatusCode, body)
		}
		if up := e.backend.take(); len(up) != 0 {
			t.Errorf("%s: backend reached", name)
		}
	}
}

// TestEndpointUpdate: a new snapshot whose auth cluster has another pod sends checks there.
func TestEndpointUpdate(t *testing.T) {
	a := startRecorder(t, nil)
	b := startRecorder(t, nil)
	e := startEnv(t, httpCfg(), []uint32{a.port}, false, 0)
	e.get(t, "/1")
	e.apply(t, httpCfg(), []uint32{b.port}, false, e.backend.port)
	e.get(t, "/2")
	if na, nb := len(a.take()), len(b.take()); na != 1 || nb != 1 {
		t.Errorf("old pod saw %d, new pod %d; want 1 and 1", na, nb)
	}
}

// checks is coxswain_extauth_checks_total{auth="ns/auth",result} of e's proxy.
func checks(t testing.TB, e *env, result string) float64 {
	t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "coxswain_extauth_checks_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["auth"] == "ns/auth" && labels["result"] == result {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func itoa(n uint32) string { return strconv.FormatUint(uint64(n), 10) }

func withHeader(ctx context.Context, k, v string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, k, v)
}

// TestGRPCAllowAndDeny: OkResponse header mutations reach the upstream (only allowed ones when
// the list is set); a DeniedResponse's status, headers and body reach the client.
func TestGRPCAllowAndDeny(t *testing.T) {
	auth := startAuthServer(t, func(req *authv3.CheckRequest) *authv3.CheckResponse {
		h := req.GetAttributes().GetRequest().GetHttp()
		if h.GetHeaders()["x-decision"] == "deny" {
			return &authv3.CheckResponse{Status: &rpcstatus.Status{Code: int32(codes.PermissionDenied)},
				HttpResponse: &authv3.CheckResponse_DeniedResponse{DeniedResponse: &authv3.DeniedHttpResponse{
					Status:  &typev3.HttpStatus{Code: typev3.StatusCode_Unauthorized},
					Headers: []*corev3.HeaderValueOption{{Header: &corev3.HeaderValue{Key: "www-authenticate", Value: "Basic"}}},
					Body:    "go away",
				}}}
		}
		return &authv3.CheckResponse{Status: &rpcstatus.Status{}, HttpResponse: &authv3.CheckResponse_OkResponse{OkResponse: &authv3.OkHttpResponse{
			Headers: []*corev3.HeaderValueOption{
				{Header: &corev3.HeaderValue{Key: "x-user", Value: "alice"}},
				{Header: &corev3.HeaderValue{Key: "x-tag", Value: "b"}, Append: wrapperspb.Bool(true)},
				{Header: &corev3.HeaderValue{Key: "x-secret", Value: "s"}},
			},
			HeadersToRemove: []string{"x-remove"},
		}}}
	})
	for _, tc := range []struct {
		name    string
		allowed []string
		secret  string
	}{{"all", nil, "s"}, {"listed", []string{"X-User", "X-Tag", "X-Remove"}, ""}} {
		e := startEnv(t, grpcCfg(tc.allowed...), []uint32{auth.port}, false, 0)
		resp, body := e.get(t, "/p?q=1", "X-User", "admin", "X-Tag", "a", "X-Remove", "1")
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %q", tc.name, resp.StatusCode, body)
		}
		up := e.backend.take()[0].Header
		if got := up.Values("X-User"); len(got) != 1 || got[0] != "alice" {
			t.Errorf("%s: X-User %q", tc.name, got)
		}
		if got := up.Values("X-Tag"); strings.Join(got, ",") != "a,b" {
			t.Errorf("%s: X-Tag %q", tc.name, got)
		}
		if up.Get("X-Remove") != "" || up.Get("X-Secret") != tc.secret {
			t.Errorf("%s: upstream %v", tc.name, up)
		}
		check, _ := auth.lastCheck()
		a := check.GetAttributes()
		h := a.GetRequest().GetHttp()
		if h.GetMethod() != "GET" || h.GetPath() != "/p?q=1" || h.GetQuery() != "q=1" || h.GetHeaders()["x-user"] != "admin" ||
			h.GetScheme() != "http" || h.GetProtocol() != "HTTP/1.1" || h.GetHeaders()[":authority"] != h.GetHost() {
			t.Errorf("%s: check http %v", tc.name, h)
		}
		src, dst := a.GetSource().GetAddress().GetSocketAddress(), a.GetDestination().GetAddress().GetSocketAddress()
		if src.GetAddress() != "127.0.0.1" || src.GetPortValue() == 0 || dst.GetAddress() != "127.0.0.1" ||
			!strings.HasSuffix(e.url, ":"+itoa(dst.GetPortValue())) {
			t.Errorf("%s: source %v destination %v (proxy %s)", tc.name, src, dst, e.url)
		}

		resp, body = e.get(t, "/p", "X-Decision", "deny")
		if resp.StatusCode != 401 || string(body) != "go away" || resp.Header.Get("WWW-Authenticate") != "Basic" {
			t.Errorf("%s deny: %d %v %q", tc.name, resp.StatusCode, resp.Header, body)
		}
		if len(e.backend.take()) != 0 {
			t.Errorf("%s deny: backend reached", tc.name)
		}
	}
}

// TestGRPCRouteDenied: a gRPC call on a GRPCRoute that the auth service denies with 403 gets
// PERMISSION_DENIED; an auth service that is down gets UNAVAILABLE; an allowed one reaches the
// backend.
func TestGRPCRouteDenied(t *testing.T) {
	be := grpctest.Start(t, "backend")
	auth := startAuthServer(t, func(req *authv3.CheckRequest) *authv3.CheckResponse {
		if req.GetAttributes().GetRequest().GetHttp().GetHeaders()["x-decision"] == "deny" {
			return &authv3.CheckResponse{Status: &rpcstatus.Status{Code: int32(codes.PermissionDenied)}}
		}
		return &authv3.CheckResponse{Status: &rpcstatus.Status{}}
	})
	e := startEnv(t, grpcCfg(), []uint32{auth.port}, true, be.Port)
	c := grpctest.Dial(t, strings.TrimPrefix(e.url, "http://"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.EmptyCall(ctx, &testgrpc.Empty{}); err != nil {
		t.Fatalf("allowed call: %v", err)
	}
	_, err := c.EmptyCall(withHeader(ctx, "x-decision", "deny"), &testgrpc.Empty{})
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("denied call: %v, want PermissionDenied", err)
	}
	auth.srv.Stop()
	if _, err := c.EmptyCall(ctx, &testgrpc.Empty{}); status.Code(err) != codes.Unavailable {
		t.Errorf("auth down: %v, want Unavailable", err)
	}
}
