package grpcroute_test

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/modules/filters/headers"
	"github.com/coxswain-labs/coxswain/modules/grpcroute"
	"github.com/coxswain-labs/coxswain/modules/grpcroute/grpctest"
	"github.com/coxswain-labs/coxswain/modules/httproute"
)

// answeredBy makes a unary call and returns the backend that answered, or the status code.
func answeredBy(t *testing.T, c testgrpc.TestServiceClient, md ...string) string {
	t.Helper()
	ctx := metadata.AppendToOutgoingContext(ctxTimeout(t), md...)
	resp, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{})
	if err != nil {
		return status.Code(err).String()
	}
	return resp.GetHostname()
}

// TestMatching routes by service and method (exact and RE2), header and authority, in the order
// the translator gives (the IR's route order is the precedence).
func TestMatching(t *testing.T) {
	a, b, c := grpctest.Start(t, "a"), grpctest.Start(t, "b"), grpctest.Start(t, "c")
	routes := []*irv1.Route{
		grpcRoute("hdr", grpcroute.Match{Method: &grpcroute.MethodMatch{Type: grpcroute.MatchExact, Service: grpctest.Service},
			Headers: []grpcroute.HeaderMatch{{Type: grpcroute.MatchExact, Name: "X-Version", Value: "two"}}}, backend("b", 1)),
		grpcRoute("unary", methodMatch(grpcroute.MatchExact, grpctest.Service, "UnaryCall"), backend("a", 1)),
		grpcRoute("streams", methodMatch(grpcroute.MatchRegularExpression, `grpc\.testing\..*`, `(Full|Half)Duplex.*`), backend("c", 1)),
		grpcRoute("regex-hdr", grpcroute.Match{Headers: []grpcroute.HeaderMatch{{Type: grpcroute.MatchRegularExpression, Name: "x-tier", Value: "^gold|platinum$"}}}, backend("c", 1)),
		grpcRoute("method-only", methodMatch(grpcroute.MatchExact, "", "StreamingInputCall"), backend("b", 1)),
	}
	addrs := startProxy(t, []*irv1.Listener{plainListener("l",
		server("", vhost("other.example", grpcRoute("other", grpcroute.Match{}, backend("c", 1))), vhost("", routes...)))},
		[]*irv1.Cluster{h2cCluster("a", a), h2cCluster("b", b), h2cCluster("c", c)})
	cl := grpctest.Dial(t, addrs[0])

	if got := answeredBy(t, cl); got != "a" {
		t.Errorf("UnaryCall: %s, want a", got)
	}
	if got := answeredBy(t, cl, "x-version", "two"); got != "b" {
		t.Errorf("UnaryCall x-version two: %s, want b", got)
	}
	if got := answeredBy(t, cl, "x-version", "three"); got != "a" {
		t.Errorf("UnaryCall x-version three: %s, want a", got)
	}
	if _, err := cl.EmptyCall(ctxTimeout(t), &testgrpc.Empty{}); status.Code(err) != codes.Unimplemented {
		t.Errorf("EmptyCall matches no route: %v, want Unimplemented", err)
	}
	gold := metadata.AppendToOutgoingContext(ctxTimeout(t), "x-tier", "gold")
	if _, err := cl.EmptyCall(gold, &testgrpc.Empty{}); err != nil {
		t.Errorf("EmptyCall x-tier gold: %v", err)
	}
	var hdr metadata.MD
	st, err := cl.FullDuplexCall(ctxTimeout(t), grpc.Header(&hdr))
	if err != nil {
		t.Fatal(err)
	}
	_ = st.CloseSend()
	if _, err := st.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("FullDuplexCall: %v", err)
	}
	if got := hdr.Get(grpctest.BackendKey); len(got) != 1 || got[0] != "c" {
		t.Errorf("FullDuplexCall went to %v, want c", got)
	}
	in, err := cl.StreamingInputCall(ctxTimeout(t), grpc.Header(&hdr))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := in.CloseAndRecv(); err != nil {
		t.Fatal(err)
	}
	if got := hdr.Get(grpctest.BackendKey); len(got) != 1 || got[0] != "b" {
		t.Errorf("StreamingInputCall went to %v, want b", got)
	}
	other := grpctest.Dial(t, addrs[0], grpc.WithAuthority("other.example"))
	if got := answeredBy(t, other); got != "c" {
		t.Errorf("authority other.example: %s, want c", got)
	}
}

// TestErrors checks that every error the engine answers on a gRPC route is a gRPC status with the
// code the package doc promises, and that non-gRPC requests are not served by gRPC routes.
func TestErrors(t *testing.T) {
	be := grpctest.Start(t, "a")
	dead := grpctest.Start(t, "dead")
	dead.Stop()
	slowRoute := grpcRoute("slow", grpcroute.Match{Headers: []grpcroute.HeaderMatch{{Name: "x-slow", Value: "1"}}}, backend("a", 1))
	slowRoute.Timeouts = &irv1.Timeouts{BackendRequestMs: 100}
	routes := []*irv1.Route{
		slowRoute,
		grpcRoute("unresolved", methodMatch("", grpctest.Service, "EmptyCall"), &irv1.Backend{Weight: 1, Error: "Service x/y does not exist"}),
		grpcRoute("no-backend", methodMatch("", grpctest.Service, "CacheableUnaryCall")),
		grpcRoute("dead", methodMatch("", grpctest.Service, "StreamingInputCall"), backend("dead", 1)),
		grpcRoute("empty", methodMatch("", grpctest.Service, "HalfDuplexCall"), backend("empty", 1)),
		grpcRoute("ok", methodMatch("", grpctest.Service, "UnaryCall"), backend("a", 1)),
	}
	empty := &irv1.Cluster{Name: "empty", Protocol: irv1.Cluster_H2C}
	addrs := startProxy(t, []*irv1.Listener{plainListener("l", server("", vhost("", routes...)))},
		[]*irv1.Cluster{h2cCluster("a", be), h2cCluster("dead", dead), empty})
	c := grpctest.Dial(t, addrs[0])

	check := func(what string, err error, want codes.Code) {
		t.Helper()
		if status.Code(err) != want {
			t.Errorf("%s: %v, want %v", what, err, want)
		}
	}
	_, err := c.EmptyCall(ctxTimeout(t), &testgrpc.Empty{})
	check("unresolved backend", err, codes.Unavailable)
	_, err = c.CacheableUnaryCall(ctxTimeout(t), &testgrpc.SimpleRequest{})
	check("rule without backends", err, codes.Unavailable)
	in, err := c.StreamingInputCall(ctxTimeout(t))
	if err == nil {
		_, err = in.CloseAndRecv()
	}
	check("backend down", err, codes.Unavailable)
	hd, err := c.HalfDuplexCall(ctxTimeout(t))
	if err == nil {
		_ = hd.CloseSend()
		_, err = hd.Recv()
	}
	check("no endpoint", err, codes.Unavailable)
	_, err = c.UnimplementedCall(ctxTimeout(t), &testgrpc.Empty{})
	check("no route", err, codes.Unimplemented)
	if st := status.Convert(err); !strings.Contains(st.Message(), "no route") {
		t.Errorf("no route: message %q", st.Message())
	}
	slow := metadata.AppendToOutgoingContext(ctxTimeout(t), "x-slow", "1", grpctest.WaitKey, "1")
	_, err = c.UnaryCall(slow, &testgrpc.SimpleRequest{})
	check("backend request timeout", err, codes.DeadlineExceeded)

	// An HTTP/1 request is not gRPC: no gRPC route serves it, and the answer is plain.
	resp, err := http.Get("http://" + addrs[0] + "/" + grpctest.Service + "/UnaryCall")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || resp.Header.Get("Grpc-Status") != "" {
		t.Errorf("HTTP/1 GET: %d %v %q", resp.StatusCode, resp.Header, body)
	}
}

// TestNoRouteWithHTTPRoutes checks that a gRPC request no route matches gets UNIMPLEMENTED on a
// listener that has HTTP routes too, and that those still serve plain HTTP.
func TestNoRouteWithHTTPRoutes(t *testing.T) {
	be := grpctest.Start(t, "a")
	httpRoute := &irv1.Route{Name: "web", Match: core.MustConfig(httproute.ModuleID,
		httproute.Match{Path: &httproute.PathMatch{Type: httproute.MatchExact, Value: "/web"}})}
	addrs := startProxy(t, []*irv1.Listener{plainListener("l",
		server("", vhost("grpc.example", grpcRoute("g", grpcroute.Match{}, backend("a", 1))), vhost("", httpRoute)))},
		[]*irv1.Cluster{h2cCluster("a", be)})
	_, err := grpctest.Dial(t, addrs[0]).EmptyCall(ctxTimeout(t), &testgrpc.Empty{})
	if st := status.Convert(err); st.Code() != codes.Unimplemented || st.Message() != "no route for this request" {
		t.Errorf("gRPC to a host without gRPC routes: %v", err)
	}
	if got := answeredBy(t, grpctest.Dial(t, addrs[0], grpc.WithAuthority("grpc.example"))); got != "a" {
		t.Errorf("gRPC host: %s", got)
	}
	resp, err := http.Get("http://" + addrs[0] + "/missing")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Errorf("HTTP 404: %d %v", resp.StatusCode, resp.Header)
	}
	resp, err = http.Get("http://" + addrs[0] + "/web")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError { // the HTTP route has no backend
		t.Errorf("HTTP route: %d", resp.StatusCode)
	}
}

// TestWeights checks that weighted backends share calls in proportion (the engine's weighted
// round robin is exact per cycle) and that a backend of weight 0 gets none.
func TestWeights(t *testing.T) {
	a, b, z := grpctest.Start(t, "a"), grpctest.Start(t, "b"), grpctest.Start(t, "z")
	addrs := startProxy(t, []*irv1.Listener{plainListener("l", server("", vhost("",
		grpcRoute("w", grpcroute.Match{}, backend("a", 3), backend("b", 1), backend("z", 0)))))},
		[]*irv1.Cluster{h2cCluster("a", a), h2cCluster("b", b), h2cCluster("z", z)})
	c := grpctest.Dial(t, addrs[0])
	got := map[string]int{}
	for range 40 {
		got[answeredBy(t, c)]++
	}
	if got["a"] != 30 || got["b"] != 10 || len(got) != 2 {
		t.Errorf("distribution %v, want a:30 b:10", got)
	}
}

// TestHeaderModifiers checks RequestHeaderModifier and ResponseHeaderModifier on a gRPC route:
// the backend sees the modified metadata, the client the modified response header, and the
// trailers are untouched.
func TestHeaderModifiers(t *testing.T) {
	be := grpctest.Start(t, "a")
	rt := grpcRoute("m", grpcroute.Match{}, backend("a", 1))
	rt.Filters = []*irv1.ModuleConfig{
		core.MustConfig(headers.RequestModuleID, headers.Config{
			Set: []headers.Header{{Name: "x-set", Value: "gateway"}}, Add: []headers.Header{{Name: "x-add", Value: "more"}},
			Remove: []string{"x-drop"}}),
		core.MustConfig(headers.ResponseModuleID, headers.Config{Set: []headers.Header{{Name: "x-resp", Value: "yes"}},
			Remove: []string{grpctest.BackendKey}}),
	}
	addrs := startProxy(t, []*irv1.Listener{plainListener("l", server("", vhost("", rt)))}, []*irv1.Cluster{h2cCluster("a", be)})
	c := grpctest.Dial(t, addrs[0])
	ctx := metadata.AppendToOutgoingContext(ctxTimeout(t), "x-set", "client", "x-add", "client", "x-drop", "gone")
	var hdr, trl metadata.MD
	if _, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{}, grpc.Header(&hdr), grpc.Trailer(&trl)); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"x-set": "gateway", "x-add": "client,more", "x-drop": ""}
	for k, v := range want {
		got := strings.Join(hdr.Get(grpctest.EchoPrefix+k), ",")
		if got != v {
			t.Errorf("backend saw %s=%q, want %q", k, got, v)
		}
	}
	if got := hdr.Get("x-resp"); len(got) != 1 || got[0] != "yes" {
		t.Errorf("response header x-resp %v", got)
	}
	if got := hdr.Get(grpctest.BackendKey); len(got) != 0 {
		t.Errorf("removed response header still there: %v", got)
	}
	if got := trl.Get(grpctest.TrailerKey); len(got) != 1 {
		t.Errorf("trailer %v", trl)
	}
}

// TestTLS runs gRPC over an HTTPS listener (TLS, ALPN h2) to a cleartext HTTP/2 backend.
func TestTLS(t *testing.T) {
	be := grpctest.Start(t, "a")
	certPEM, keyPEM := selfSigned(t, "grpc.example")
	l := plainListener("tls", &irv1.Server{Hostname: "grpc.example", Tls: &irv1.TLS{Certificates: []string{"cert"}},
		VirtualHosts: []*irv1.VirtualHost{vhost("grpc.example", grpcRoute("r", grpcroute.Match{}, backend("a", 1)))}})
	l.Protocol = "HTTPS"
	addrs := startProxy(t, []*irv1.Listener{l}, []*irv1.Cluster{h2cCluster("a", be)},
		&irv1.Secret{Name: "cert", CertificatePem: certPEM, PrivateKeyPem: keyPEM})
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certPEM)
	creds := credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: "grpc.example", MinVersion: tls.VersionTLS12})
	cc, err := grpc.NewClient("passthrough:///"+addrs[0], grpc.WithTransportCredentials(creds), grpc.WithAuthority("grpc.example"))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	resp, err := testgrpc.NewTestServiceClient(cc).UnaryCall(ctxTimeout(t), &testgrpc.SimpleRequest{})
	if err != nil || resp.GetHostname() != "a" {
		t.Fatalf("%v %v", resp, err)
	}
}

// TestHeaderModifierMetadataCase checks GRPCRouteRequestHeaderModifier's case rules: gRPC clients
// send lowercase metadata keys while the filter names headers in canonical case, so set replaces,
// add appends to and remove drops the client's lowercase keys; and a backendRef's own modifier
// runs after the rule's, on the backend it belongs to.
func TestHeaderModifierMetadataCase(t *testing.T) {
	be := grpctest.Start(t, "a")
	ruleMod := core.MustConfig(headers.RequestModuleID, headers.Config{
		Set:    []headers.Header{{Name: "X-Header-Set-1", Value: "set-overwrites"}},
		Add:    []headers.Header{{Name: "X-Header-Add-1", Value: "appended"}},
		Remove: []string{"X-Header-Remove-1"}})
	backendMod := core.MustConfig(headers.RequestModuleID, headers.Config{
		Set: []headers.Header{{Name: "X-Backend", Value: "a"}, {Name: "X-Header-Set-1", Value: "backend-wins"}}})
	rt := grpcRoute("m", grpcroute.Match{}, backend("a", 1, backendMod))
	rt.Filters = []*irv1.ModuleConfig{ruleMod}
	addrs := startProxy(t, []*irv1.Listener{plainListener("l", server("", vhost("", rt)))}, []*irv1.Cluster{h2cCluster("a", be)})
	c := grpctest.Dial(t, addrs[0])
	ctx := metadata.AppendToOutgoingContext(ctxTimeout(t),
		"x-header-set-1", "original", "x-header-add-1", "existing", "x-header-remove-1", "gone")
	var hdr metadata.MD
	if _, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{}, grpc.Header(&hdr)); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"x-header-set-1": "backend-wins", "x-header-add-1": "existing,appended",
		"x-header-remove-1": "", "x-backend": "a"}
	for k, v := range want {
		if got := strings.Join(hdr.Get(grpctest.EchoPrefix+k), ","); got != v {
			t.Errorf("backend saw %s=%q, want %q", k, got, v)
		}
	}
}
