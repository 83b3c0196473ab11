package integration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	grpcstatus "google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/controller/translator"
	"github.com/coxswain-labs/coxswain/modules/grpcroute/grpctest"
	_ "github.com/coxswain-labs/coxswain/modules/grpcroute/translate" // a route kind of the stock binary
	"github.com/coxswain-labs/coxswain/modules/translation"
	"github.com/coxswain-labs/coxswain/test/integration/env"
)

// TestGRPCRoute: a GRPCRoute through the API server to grpc-go backends (no appProtocol on the
// Service port: the route kind says h2c), driven by a grpc-go client; its status, the
// GatewayClass's GRPCRoute feature, and the hostname rule between HTTPRoutes and GRPCRoutes.
func TestGRPCRoute(t *testing.T) {
	e := env.Start(t)
	startController(t, e, controllerOpts{})
	ns := namespace(t, e, "grpc", nil)
	v1 := grpctest.StartAt(t, "v1", "10.99.20.1:8080")
	grpctest.StartAt(t, "v2", "10.99.20.2:8080")
	startBackend(t, "web", "10.99.20.3:8080")
	createService(t, e, ns, "v1", "10.99.20.1")
	createService(t, e, ns, "v2", "10.99.20.2")
	createService(t, e, ns, "web", "10.99.20.3")
	createClass(t, e, "grpc", "")
	const port = 18800
	createGateway(t, e, ns, "gw", "grpc", httpListener("http", port))
	parents := []gwapiv1.ParentReference{parentRef(ns, "gw")}
	createRoute(t, e, httpRoute(ns, "web", parents, []string{"web.example"}, prefixRule("/", backendRef("web", 1))))

	ref := func(svc string) gwapiv1.GRPCBackendRef {
		return gwapiv1.GRPCBackendRef{BackendRef: gwapiv1.BackendRef{BackendObjectReference: gwapiv1.BackendObjectReference{
			Name: gwapiv1.ObjectName(svc), Port: ptr.To(gwapiv1.PortNumber(80))}}}
	}
	r := &gwapiv1.GRPCRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "echo"}}
	r.Spec.ParentRefs = parents
	r.Spec.Hostnames = []gwapiv1.Hostname{"grpc.example"}
	r.Spec.Rules = []gwapiv1.GRPCRouteRule{
		{Matches: []gwapiv1.GRPCRouteMatch{{Method: &gwapiv1.GRPCMethodMatch{Service: ptr.To(grpctest.Service), Method: ptr.To("UnaryCall")}}},
			BackendRefs: []gwapiv1.GRPCBackendRef{ref("v1")}},
		{Matches: []gwapiv1.GRPCRouteMatch{{Headers: []gwapiv1.GRPCHeaderMatch{{Name: "x-version", Value: "two"}}}},
			BackendRefs: []gwapiv1.GRPCBackendRef{ref("v2")}},
		{Matches: []gwapiv1.GRPCRouteMatch{{Method: &gwapiv1.GRPCMethodMatch{Method: ptr.To("FullDuplexCall")}}},
			BackendRefs: []gwapiv1.GRPCBackendRef{ref("v1")}},
	}
	if _, err := e.Gateway.GatewayV1().GRPCRoutes(ns).Create(ctxFor(t), r, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	grpcRouteConds(t, e, ns, "echo", accepted, resolved)

	c := grpctest.Dial(t, fmt.Sprintf("%s:%d", gatewayIP, port), grpc.WithAuthority("grpc.example"))
	call := func(md ...string) (string, error) {
		ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), md...), 5*time.Second)
		defer cancel()
		resp, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{})
		return resp.GetHostname(), err
	}
	eventually(t, "UnaryCall served by v1", func() error {
		if got, err := call(); err != nil || got != "v1" {
			return fmt.Errorf("%q %v", got, err)
		}
		return nil
	})
	if got, err := call("x-version", "two"); err != nil || got != "v1" {
		t.Errorf("service+method outranks a header match: %q %v", got, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.EmptyCall(metadata.AppendToOutgoingContext(ctx, "x-version", "two"), &testgrpc.Empty{}); err != nil {
		t.Errorf("EmptyCall with x-version two: %v", err)
	}
	if _, err := c.EmptyCall(ctx, &testgrpc.Empty{}); grpcstatus.Code(err) != codes.Unimplemented {
		t.Errorf("EmptyCall matches no rule: %v, want Unimplemented", err)
	}
	t.Run("bidi stream", func(t *testing.T) {
		st, err := c.FullDuplexCall(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 5 {
			body := []byte{byte(i)}
			if err := st.Send(&testgrpc.StreamingOutputCallRequest{Payload: &testgrpc.Payload{Body: body},
				ResponseParameters: []*testgrpc.ResponseParameters{{}}}); err != nil {
				t.Fatal(err)
			}
			if m, err := st.Recv(); err != nil || string(m.GetPayload().GetBody()) != string(body) {
				t.Fatalf("round %d: %v", i, err)
			}
		}
		_ = st.CloseSend()
		if _, err := st.Recv(); !errors.Is(err, io.EOF) {
			t.Fatal(err)
		}
		if st.Trailer().Get(grpctest.TrailerKey) == nil {
			t.Errorf("trailers %v", st.Trailer())
		}
	})
	t.Run("deadline", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), grpctest.WaitKey, "1"), 300*time.Millisecond)
		defer cancel()
		if _, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{}); grpcstatus.Code(err) != codes.DeadlineExceeded {
			t.Fatalf("got %v", err)
		}
		select {
		case d := <-v1.Deadlines:
			if !d.Set {
				t.Errorf("the backend saw no deadline")
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the backend's call did not end")
		}
	})
	t.Run("GatewayClass supports GRPCRoute", func(t *testing.T) {
		eventually(t, "supportedFeatures", func() error {
			gc, err := e.Gateway.GatewayV1().GatewayClasses().Get(ctxFor(t), "grpc", metav1.GetOptions{})
			if err != nil {
				return err
			}
			for _, f := range gc.Status.SupportedFeatures {
				if f.Name == "GRPCRoute" {
					return nil
				}
			}
			return fmt.Errorf("supportedFeatures %v", gc.Status.SupportedFeatures)
		})
	})
	t.Run("a newer GRPCRoute loses a hostname to an older HTTPRoute", func(t *testing.T) {
		// Creation timestamps have one-second resolution; on a tie "<namespace>/<name>" decides,
		// and "web" sorts before "web-grpc", so the HTTPRoute wins either way.
		late := &gwapiv1.GRPCRoute{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web-grpc"}}
		late.Spec.ParentRefs = parents
		late.Spec.Hostnames = []gwapiv1.Hostname{"web.example"}
		late.Spec.Rules = []gwapiv1.GRPCRouteRule{{BackendRefs: []gwapiv1.GRPCBackendRef{ref("v2")}}}
		if _, err := e.Gateway.GatewayV1().GRPCRoutes(ns).Create(ctxFor(t), late, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		grpcRouteConds(t, e, ns, "web-grpc", cond{"Accepted", "False", translation.RouteReasonHostnameConflict})
		served(t, port, "web.example", "/", 200, "web")
	})
}

// grpcRouteConds waits until our parent status of a GRPCRoute has the wanted conditions.
func grpcRouteConds(t *testing.T, e *env.Env, ns, name string, wants ...cond) {
	t.Helper()
	eventually(t, "GRPCRoute "+name+" status", func() error {
		got, err := e.Gateway.GatewayV1().GRPCRoutes(ns).Get(ctxFor(t), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, p := range got.Status.Parents {
			if p.ControllerName == translator.DefaultControllerName {
				if c := meta.FindStatusCondition(p.Conditions, "Accepted"); c == nil {
					return errors.New("no Accepted condition")
				}
				return checkConds(p.Conditions, got.Generation, wants...)
			}
		}
		return fmt.Errorf("no parent status of ours: %+v", got.Status.Parents)
	})
}
