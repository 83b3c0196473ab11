package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/coxswain-labs/coxswain/modules/grpcroute/grpctest"
)

// ipsizeGRPCYAML is a gRPC backend, a Gateway of its own on grpcPort (the examples' HTTPRoutes
// take every hostname of theirs, which a GRPCRoute may not share) and a GRPCRoute whose first
// rule is behind the example's IpAccessControl "not-127-0-0-1" and whose second names the
// example's RequestSizeLimit, which GRPCRoute accepts but does not enforce.
func ipsizeGRPCYAML(s *grpctest.Server, grpcPort int) string {
	return grpcServiceYAML("grpc-app", "kubernetes.io/h2c", s) + fmt.Sprintf(`---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: grpc-filters, namespace: default}
spec:
  gatewayClassName: coxswain
  addresses: [{type: IPAddress, value: 127.0.0.1}]
  listeners: [{name: grpc, protocol: HTTP, port: %d}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: grpc-ipsize, namespace: default}
spec:
  parentRefs: [{name: grpc-filters}]
  hostnames: [grpc.example]
  rules:
  - matches: [{method: {service: grpc.testing.TestService, method: UnaryCall}}]
    filters:
    - type: ExtensionRef
      extensionRef: {group: gateway.coxswain-labs.dev, kind: IpAccessControl, name: not-127-0-0-1}
    backendRefs: [{name: grpc-app, port: 50051}]
  - matches: [{method: {service: grpc.testing.TestService, method: StreamingInputCall}}]
    filters:
    - type: ExtensionRef
      extensionRef: {group: gateway.coxswain-labs.dev, kind: RequestSizeLimit, name: one-mebibyte}
    backendRefs: [{name: grpc-app, port: 50051}]
`, grpcPort)
}

// startReadingBackend is startBackend's echo, answering only once it has read the whole request
// body: an upstream that answers first would have started the response before the size limit
// could refuse it.
func startReadingBackend(t *testing.T, name string) int {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(echo{Backend: name, Method: r.Method, Host: r.Host, Path: r.URL.Path, Query: r.URL.RawQuery})
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().(*net.TCPAddr).Port
}

// serveIPSize serves examples/filters plus ipsizeGRPCYAML and returns the server, the examples'
// Gateway's port and the gRPC Gateway's.
func serveIPSize(t *testing.T) (s *server, port, grpcPort int) {
	port, grpcPort = freePort(t), freePort(t)
	files := exampleFiles(t, "filters", map[string]int{"port: 8090": port, "port: 9331": startReadingBackend(t, "app")})
	files["grpc-ipsize.yaml"] = ipsizeGRPCYAML(grpctest.Start(t, "grpc-app"), grpcPort)
	return startServe(t, files), port, grpcPort
}

// dialFrom dials from the loopback address src, so the proxy sees that client address.
func dialFrom(src string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}, Timeout: 5 * time.Second}
	return d.DialContext
}

func clientFrom(src string, h2c bool) *http.Client {
	tr := &http.Transport{DialContext: dialFrom(src), DisableKeepAlives: !h2c}
	if h2c {
		var p http.Protocols
		p.SetUnencryptedHTTP2(true)
		tr.Protocols = &p
	}
	return &http.Client{Transport: tr, Timeout: 20 * time.Second}
}

// warnings reads the admin /status report's warnings about object, as "field: message".
func warnings(t *testing.T, s *server, object string) []string {
	t.Helper()
	body, code, err := s.adminGet("/status")
	if err != nil || code != http.StatusOK {
		t.Fatalf("/status: %d %v", code, err)
	}
	var st struct {
		Report struct {
			Warnings []struct{ Object, Field, Message string } `json:"warnings"`
		} `json:"report"`
	}
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, w := range st.Report.Warnings {
		if w.Object == object {
			out = append(out, w.Field+": "+w.Message)
		}
	}
	return out
}

// TestExamplesIPAccess serves examples/filters and sends from 127.0.0.1, .2 and .3: the allow
// list and the deny list of examples/filters/ipaccesscontrol.yaml, the skipped entry and its
// warning, and a GRPCRoute behind the deny list answering PERMISSION_DENIED.
func TestExamplesIPAccess(t *testing.T) {
	s, port, grpcPort := serveIPSize(t)
	get := func(src, path string) (*result, error) {
		return do(context.Background(), clientFrom(src, false), request{url: fmt.Sprintf("http://127.0.0.1:%d%s", port, path)})
	}
	eventually(t, 10*time.Second, "/ipaccess/allow-list served to 127.0.0.2", func() error {
		res, err := get("127.0.0.2", "/ipaccess/allow-list/x")
		if err != nil {
			return err
		}
		if res.code != 200 || res.echo == nil || res.echo.Path != "/ipaccess/allow-list/x" {
			return fmt.Errorf("got %d %s", res.code, res.body)
		}
		return nil
	})
	for _, tc := range []struct {
		src, path string
		want      int
	}{
		{"127.0.0.1", "/ipaccess/allow-list/x", 403},
		{"127.0.0.3", "/ipaccess/allow-list/x", 403},
		{"127.0.0.1", "/ipaccess/deny-list/x", 403},
		{"127.0.0.2", "/ipaccess/deny-list/x", 200},
		{"127.0.0.3", "/ipaccess/deny-list/x", 200},
		{"127.0.0.3", "/ipaccess/typo/x", 403}, // the valid entry of the list holds
		{"127.0.0.1", "/ipaccess/typo/x", 200},
		{"127.0.0.1", "/plain", 200}, // the other examples' routes are untouched
	} {
		res, err := get(tc.src, tc.path)
		if err != nil || res.code != tc.want {
			t.Errorf("GET %s from %s: %v %+v, want %d", tc.path, tc.src, err, res, tc.want)
			continue
		}
		if tc.want == 403 && (res.echo != nil || strings.TrimSpace(res.body) != "access denied") {
			t.Errorf("GET %s from %s: body %q, want the filter's refusal", tc.path, tc.src, res.body)
		}
	}
	if w := warnings(t, s, "HTTPRoute default/ipaccess"); len(w) != 1 || !strings.Contains(w[0], `deny[1] "127.0.0.300" is not an address or CIDR and is ignored`) {
		t.Errorf("warnings of HTTPRoute default/ipaccess: %q", w)
	}
	if got := routeCondition(t, s, "HTTPRoute", "ipaccess", "ResolvedRefs"); got != "True/ResolvedRefs" {
		t.Errorf("HTTPRoute ipaccess ResolvedRefs %s, want True: a skipped entry is a warning", got)
	}

	addr := fmt.Sprintf("127.0.0.1:%d", grpcPort)
	for src, want := range map[string]codes.Code{"127.0.0.1": codes.PermissionDenied, "127.0.0.2": codes.OK} {
		c := grpctest.Dial(t, addr, grpc.WithAuthority("grpc.example"), grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) {
			return dialFrom(src)(ctx, "tcp", a)
		}))
		var code codes.Code
		eventually(t, 10*time.Second, "GRPCRoute served", func() error {
			_, err := c.UnaryCall(rpcCtx(t), &testgrpc.SimpleRequest{})
			if code = grpcstatus.Code(err); code == codes.Unimplemented || code == codes.Unavailable {
				return err // not routed yet
			}
			return nil
		})
		if code != want {
			t.Errorf("UnaryCall from %s: %v, want %v", src, code, want)
		}
	}
}

// TestExamplesSizeLimit serves examples/filters: bodies over the 1 MiB limit of
// examples/filters/requestsizelimit.yaml are refused (declared or streamed, HTTP/1.1 or h2c), the
// unparseable size fails open with a warning, and the GRPCRoute's RequestSizeLimit is accepted
// with a warning and not enforced.
func TestExamplesSizeLimit(t *testing.T) {
	s, port, grpcPort := serveIPSize(t)
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	post := func(h2c bool, path string, n int, declared bool) (int, error) {
		var body io.Reader = bytes.NewReader(make([]byte, n))
		if !declared {
			body = io.MultiReader(body) // hides the length: chunked on HTTP/1.1
		}
		req, err := http.NewRequest(http.MethodPost, url+path, body)
		if err != nil {
			return 0, err
		}
		resp, err := clientFrom("127.0.0.1", h2c).Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	}
	eventually(t, 10*time.Second, "/sizelimit served", func() error {
		if code, err := post(false, "/sizelimit/x", 10, true); err != nil || code != 200 {
			return fmt.Errorf("%d %v", code, err)
		}
		return nil
	})
	for _, tc := range []struct {
		name          string
		h2c, declared bool
		path          string
		size          int
		want          int // 0: 413, or the connection ended while the client was still sending
	}{
		{"within, declared", false, true, "/sizelimit/x", 1 << 20, 200},
		{"within, chunked", false, false, "/sizelimit/x", 1 << 20, 200},
		{"within, h2c streamed", true, false, "/sizelimit/x", 1 << 20, 200},
		{"over, declared", false, true, "/sizelimit/x", 1<<20 + 1, 0}, // refused before the body: a client still sending may see the close first
		{"over, h2c declared", true, true, "/sizelimit/x", 2 << 20, 413},
		{"over, h2c streamed", true, false, "/sizelimit/x", 8 << 20, 413},
		{"over, chunked", false, false, "/sizelimit/x", 8 << 20, 0},
		{"unparseable size: not enforced", false, true, "/sizelimit/typo/x", 2 << 20, 200},
	} {
		code, err := post(tc.h2c, tc.path, tc.size, tc.declared)
		switch {
		case tc.want == 0 && (err != nil || code == 413):
		case err != nil || code != tc.want:
			t.Errorf("%s: %d %v, want %d", tc.name, code, err, tc.want)
		}
	}
	if w := warnings(t, s, "HTTPRoute default/sizelimit"); len(w) != 1 || !strings.Contains(w[0], `"10mb"`) || !strings.Contains(w[0], "not enforced") {
		t.Errorf("warnings of HTTPRoute default/sizelimit: %q", w)
	}
	if w := warnings(t, s, "GRPCRoute default/grpc-ipsize"); len(w) != 1 || !strings.Contains(w[0], "is not enforced on GRPCRoute") {
		t.Errorf("warnings of GRPCRoute default/grpc-ipsize: %q", w)
	}
	// Not enforced on the GRPCRoute: 2 MiB of client stream goes through.
	c := grpctest.Dial(t, fmt.Sprintf("127.0.0.1:%d", grpcPort), grpc.WithAuthority("grpc.example"))
	st, err := c.StreamingInputCall(rpcCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := st.Send(&testgrpc.StreamingInputCallRequest{Payload: &testgrpc.Payload{Body: make([]byte, 1<<20)}}); err != nil {
			t.Fatal(err)
		}
	}
	if resp, err := st.CloseAndRecv(); err != nil || resp.GetAggregatedPayloadSize() != 2<<20 {
		t.Errorf("2 MiB client stream on the GRPCRoute: %v %v", resp, err)
	}
}
