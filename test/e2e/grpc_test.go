package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/coxswain-labs/coxswain/modules/grpcroute/grpctest"
)

// grpcServiceYAML is a Service and EndpointSlice for a gRPC backend; appProtocol may be empty.
func grpcServiceYAML(name, appProtocol string, s *grpctest.Server) string {
	ap := ""
	if appProtocol != "" {
		ap = ", appProtocol: " + appProtocol
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: %[1]s}
spec:
  ports: [{name: grpc, port: 50051%[2]s}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: %[1]s
  labels: {kubernetes.io/service-name: %[1]s}
addressType: IPv4
ports: [{name: grpc, port: %[3]d}]
endpoints: [{addresses: [127.0.0.1]}]
`, name, ap, s.Port)
}

// grpcRoutesYAML is the GRPCRoute of TestGRPCRoute; unaryTo is the backend of UnaryCall.
func grpcRoutesYAML(unaryTo string) string {
	return fmt.Sprintf(`apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: echo, creationTimestamp: "2024-01-01T00:00:00Z"}
spec:
  parentRefs: [{name: gw}]
  hostnames: [grpc.example]
  rules:
  - matches: [{method: {service: grpc.testing.TestService, method: UnaryCall}}]
    backendRefs: [{name: %s, port: 50051}]
  - matches:
    - method: {service: grpc.testing.TestService, method: UnaryCall}
      headers: [{name: x-version, value: two}]
    backendRefs: [{name: v2, port: 50051}]
  - matches: [{method: {type: RegularExpression, service: 'grpc\.testing\..*', method: 'Streaming.*|FullDuplexCall'}}]
    filters:
    - type: RequestHeaderModifier
      requestHeaderModifier: {set: [{name: x-gateway, value: coxswain}]}
    - type: ResponseHeaderModifier
      responseHeaderModifier: {add: [{name: x-served-by, value: coxswain}]}
    backendRefs: [{name: v1, port: 50051}]
  - matches: [{method: {method: EmptyCall}}]
    backendRefs: [{name: v1, port: 50051}, {name: v2, port: 50051}]
  - matches: [{method: {method: CacheableUnaryCall}}]
    backendRefs: [{name: missing, port: 50051}]
`, unaryTo)
}

// TestGRPCRoute runs `coxswain serve` with a GRPCRoute in front of two grpc-go backends and
// drives it with a grpc-go client: every RPC kind, metadata both ways, trailers, deadlines,
// weights, gRPC errors, TLS, a live change, and the hostname rule between HTTPRoutes and
// GRPCRoutes.
func TestGRPCRoute(t *testing.T) {
	v1, v2 := grpctest.Start(t, "v1"), grpctest.Start(t, "v2")
	web := startBackend(t, "web")
	httpPort, httpsPort := freePort(t), freePort(t)
	certPEM, keyPEM := selfSigned(t, "grpc.example")
	httpRoutes := routeYAML("web", "2024-01-01T00:00:00Z", `  hostnames: [web.example]
  rules: [{backendRefs: [{name: web, port: 80}]}]
`) + "---\n" + routeYAML("clash", "2024-06-01T00:00:00Z", `  hostnames: ["*.example"]
  rules: [{backendRefs: [{name: web, port: 80}]}]
`)
	s := startServe(t, map[string]string{
		"class.yaml":  gatewayClassYAML,
		"gw.yaml":     gatewayYAML(listener{name: "http", protocol: "HTTP", port: httpPort}, listener{name: "https", protocol: "HTTPS", port: httpsPort, certSecret: "cert"}),
		"grpc.yaml":   grpcRoutesYAML("v1"),
		"http.yaml":   httpRoutes,
		"secret.yaml": tlsSecretYAML("cert", certPEM, keyPEM),
		"svc.yaml": strings.Join([]string{grpcServiceYAML("v1", "kubernetes.io/h2c", v1), grpcServiceYAML("v2", "", v2),
			serviceYAML(web)}, "---\n"),
	})
	addr := fmt.Sprintf("127.0.0.1:%d", httpPort)
	c := grpctest.Dial(t, addr, grpc.WithAuthority("grpc.example"))

	t.Run("unary with metadata and trailers", func(t *testing.T) {
		ctx := metadata.AppendToOutgoingContext(rpcCtx(t), "x-user", "alice")
		var hdr, trl metadata.MD
		resp, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{Payload: &testgrpc.Payload{Body: []byte("hi")}}, grpc.Header(&hdr), grpc.Trailer(&trl))
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetHostname() != "v1" || string(resp.GetPayload().GetBody()) != "hi" {
			t.Errorf("response %v", resp)
		}
		if got := hdr.Get(grpctest.EchoPrefix + "x-user"); len(got) != 1 || got[0] != "alice" {
			t.Errorf("backend saw x-user %v", got)
		}
		if got := trl.Get(grpctest.TrailerKey); len(got) != 1 || got[0] != "done-v1" {
			t.Errorf("trailers %v", trl)
		}
	})
	t.Run("header match wins by precedence", func(t *testing.T) {
		if got := unaryBackend(t, c, "x-version", "two"); got != "v2" {
			t.Errorf("x-version two went to %s", got)
		}
	})
	t.Run("backend status passes through", func(t *testing.T) {
		_, err := c.UnaryCall(rpcCtx(t), &testgrpc.SimpleRequest{ResponseStatus: &testgrpc.EchoStatus{Code: int32(codes.AlreadyExists), Message: "dup"}})
		if st := grpcstatus.Convert(err); st.Code() != codes.AlreadyExists || st.Message() != "dup" {
			t.Errorf("got %v", err)
		}
	})
	t.Run("streaming kinds and header filters", func(t *testing.T) { grpcStreams(t, c) })
	t.Run("deadline", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), grpctest.WaitKey, "1"), 200*time.Millisecond)
		defer cancel()
		if _, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{}); grpcstatus.Code(err) != codes.DeadlineExceeded {
			t.Fatalf("got %v", err)
		}
		select {
		case d := <-v1.Deadlines:
			if !d.Set || d.Remaining > 200*time.Millisecond {
				t.Errorf("backend saw %+v", d)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the backend's call did not end")
		}
	})
	t.Run("weights", func(t *testing.T) {
		seen := map[string]int{}
		for range 10 {
			var hdr metadata.MD
			if _, err := c.EmptyCall(rpcCtx(t), &testgrpc.Empty{}, grpc.Header(&hdr)); err != nil {
				t.Fatal(err)
			}
			seen[strings.Join(hdr.Get(grpctest.BackendKey), ",")]++
		}
		if seen["v1"] != 5 || seen["v2"] != 5 {
			t.Errorf("EmptyCall went to %v", seen)
		}
	})
	t.Run("errors are gRPC statuses", func(t *testing.T) {
		_, err := c.CacheableUnaryCall(rpcCtx(t), &testgrpc.SimpleRequest{})
		if grpcstatus.Code(err) != codes.Unavailable {
			t.Errorf("unresolved backend: %v", err)
		}
		_, err = c.UnimplementedCall(rpcCtx(t), &testgrpc.Empty{})
		if st := grpcstatus.Convert(err); st.Code() != codes.Unimplemented || st.Message() != "no route for this request" {
			t.Errorf("no route: %v", err)
		}
	})
	t.Run("TLS listener", func(t *testing.T) {
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(certPEM)
		creds := credentials.NewTLS(&tls.Config{RootCAs: pool, ServerName: "grpc.example", MinVersion: tls.VersionTLS12})
		tc := grpctest.Dial(t, fmt.Sprintf("127.0.0.1:%d", httpsPort), grpc.WithTransportCredentials(creds))
		if got := unaryBackend(t, tc); got != "v1" {
			t.Errorf("over TLS: %s", got)
		}
	})
	t.Run("HTTPRoutes and GRPCRoutes share a listener, not a hostname", func(t *testing.T) {
		r, err := do(rpcCtx(t), http.DefaultClient, request{url: "http://" + addr + "/", host: "web.example"})
		if err != nil || r.backendOf() != "web" {
			t.Fatalf("HTTP on web.example: %v %v", r, err)
		}
		r, err = do(rpcCtx(t), http.DefaultClient, request{url: "http://" + addr + "/", host: "grpc.example"})
		if err != nil || r.code != http.StatusNotFound {
			t.Fatalf("HTTP on grpc.example (the newer HTTPRoute lost it): %v %v", r, err)
		}
		if got := routeCondition(t, s, "HTTPRoute", "clash", "Accepted"); got != "False/HostnameConflict" {
			t.Errorf("clash Accepted=%s", got)
		}
		if got := routeCondition(t, s, "GRPCRoute", "echo", "Accepted"); got != "True/Accepted" {
			t.Errorf("echo Accepted=%s", got)
		}
	})
	t.Run("a change reaches an open connection", func(t *testing.T) {
		s.replace("grpc.yaml", grpcRoutesYAML("v2"))
		eventually(t, 20*time.Second, "UnaryCall moves to v2", func() error {
			if got := unaryBackend(t, c); got != "v2" {
				return fmt.Errorf("still %s", got)
			}
			return nil
		})
	})
}

func rpcCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// unaryBackend makes a UnaryCall with metadata md and returns the backend that answered, or the
// status code.
func unaryBackend(t *testing.T, c testgrpc.TestServiceClient, md ...string) string {
	t.Helper()
	resp, err := c.UnaryCall(metadata.AppendToOutgoingContext(rpcCtx(t), md...), &testgrpc.SimpleRequest{})
	if err != nil {
		return grpcstatus.Code(err).String()
	}
	return resp.GetHostname()
}

// grpcStreams runs one RPC of each streaming kind through the route that modifies headers.
func grpcStreams(t *testing.T, c testgrpc.TestServiceClient) {
	out, err := c.StreamingOutputCall(rpcCtx(t), &testgrpc.StreamingOutputCallRequest{
		ResponseParameters: []*testgrpc.ResponseParameters{{Size: 10}, {Size: 70000}, {Size: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{10, 70000, 1} {
		m, err := out.Recv()
		if err != nil || len(m.GetPayload().GetBody()) != n {
			t.Fatalf("server stream: %v %d bytes, want %d", err, len(m.GetPayload().GetBody()), n)
		}
	}
	if _, err := out.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("server stream end: %v", err)
	}
	hdr, _ := out.Header()
	if strings.Join(hdr.Get("x-served-by"), ",") != "coxswain" || strings.Join(hdr.Get(grpctest.EchoPrefix+"x-gateway"), ",") != "coxswain" {
		t.Errorf("server stream header %v", hdr)
	}
	if got := out.Trailer().Get(grpctest.TrailerKey); len(got) != 1 {
		t.Errorf("server stream trailers %v", out.Trailer())
	}

	in, err := c.StreamingInputCall(rpcCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{5, 100000, 7} {
		if err := in.Send(&testgrpc.StreamingInputCallRequest{Payload: &testgrpc.Payload{Body: make([]byte, n)}}); err != nil {
			t.Fatal(err)
		}
	}
	if resp, err := in.CloseAndRecv(); err != nil || resp.GetAggregatedPayloadSize() != 100012 {
		t.Fatalf("client stream: %v %v", resp, err)
	}

	bidi, err := c.FullDuplexCall(rpcCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		body := []byte(fmt.Sprintf("ping %d", i))
		if err := bidi.Send(&testgrpc.StreamingOutputCallRequest{Payload: &testgrpc.Payload{Body: body},
			ResponseParameters: []*testgrpc.ResponseParameters{{}}}); err != nil {
			t.Fatal(err)
		}
		m, err := bidi.Recv()
		if err != nil || string(m.GetPayload().GetBody()) != string(body) {
			t.Fatalf("bidi round %d: %v %q", i, err, m.GetPayload().GetBody())
		}
	}
	if err := bidi.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := bidi.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("bidi end: %v", err)
	}
}

// routeCondition reads one condition of the first parent of a route of kind from /status; the
// result is "<status>/<reason>".
func routeCondition(t *testing.T, s *server, kind, name, typ string) string {
	t.Helper()
	body, code, err := s.adminGet("/status")
	if err != nil || code != http.StatusOK {
		t.Fatalf("/status: %d %v", code, err)
	}
	var st struct {
		Report map[string]json.RawMessage `json:"report"`
	}
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	var objs []struct {
		Kind   string `json:"kind"`
		Name   string `json:"name"`
		Status struct {
			Parents []struct {
				Conditions []struct {
					Type, Status, Reason string
				} `json:"conditions"`
			} `json:"parents"`
		} `json:"status"`
	}
	if err := json.Unmarshal(st.Report["routes"], &objs); err != nil {
		t.Fatalf("report.routes: %v", err)
	}
	for _, o := range objs {
		if o.Kind != kind || o.Name != name || len(o.Status.Parents) == 0 {
			continue
		}
		for _, c := range o.Status.Parents[0].Conditions {
			if c.Type == typ {
				return c.Status + "/" + c.Reason
			}
		}
	}
	return "(none)"
}
