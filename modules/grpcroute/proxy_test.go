package grpcroute_test

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy"
	"github.com/coxswain-labs/coxswain/modules/grpcroute"
	"github.com/coxswain-labs/coxswain/modules/grpcroute/grpctest"
)

// catchAll serves every gRPC request of any host with one route to cluster "grpc".
func catchAll(t *testing.T, be *grpctest.Server) testgrpc.TestServiceClient {
	t.Helper()
	addrs := startProxy(t, []*irv1.Listener{plainListener("l", server("", vhost("",
		grpcRoute("all", grpcroute.Match{}, backend("grpc", 1)))))},
		[]*irv1.Cluster{h2cCluster("grpc", be)})
	return grpctest.Dial(t, addrs[0])
}

func ctxTimeout(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestUnary checks a unary call end to end: request metadata reaches the backend, response
// headers and trailers come back, and the payload is intact.
func TestUnary(t *testing.T) {
	be := grpctest.Start(t, "a")
	c := catchAll(t, be)
	ctx := metadata.AppendToOutgoingContext(ctxTimeout(t), "x-user", "alice", "x-multi", "1", "x-multi", "2")
	var hdr, trl metadata.MD
	resp, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{Payload: &testgrpc.Payload{Body: []byte("ping")}},
		grpc.Header(&hdr), grpc.Trailer(&trl))
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetHostname() != "a" || string(resp.GetPayload().GetBody()) != "ping" {
		t.Errorf("response %v", resp)
	}
	if got := hdr.Get(grpctest.EchoPrefix + "x-user"); len(got) != 1 || got[0] != "alice" {
		t.Errorf("backend saw x-user %q (header %v)", got, hdr)
	}
	if got := hdr.Get(grpctest.EchoPrefix + "x-multi"); len(got) != 1 || got[0] != "1,2" {
		t.Errorf("backend saw x-multi %q", got)
	}
	if got := trl.Get(grpctest.TrailerKey); len(got) != 1 || got[0] != "done-a" {
		t.Errorf("trailer %v", trl)
	}
}

// TestBackendStatus checks that a backend's error status and message (a trailers-only response)
// reach the client unchanged, non-ASCII message included.
func TestBackendStatus(t *testing.T) {
	c := catchAll(t, grpctest.Start(t, "a"))
	for _, code := range []codes.Code{codes.NotFound, codes.PermissionDenied, codes.ResourceExhausted, codes.Internal} {
		msg := "nope: 100% ünïcode"
		var trl metadata.MD
		_, err := c.UnaryCall(ctxTimeout(t), &testgrpc.SimpleRequest{
			ResponseStatus: &testgrpc.EchoStatus{Code: int32(code), Message: msg}}, grpc.Trailer(&trl))
		st := status.Convert(err)
		if st.Code() != code || st.Message() != msg {
			t.Errorf("want %v %q, got %v %q", code, msg, st.Code(), st.Message())
		}
		if got := trl.Get(grpctest.TrailerKey); len(got) != 1 {
			t.Errorf("%v: trailer %v", code, trl)
		}
	}
}

// TestServerStreaming checks that every message of a server stream arrives, in order, with the
// trailers after them.
func TestServerStreaming(t *testing.T) {
	c := catchAll(t, grpctest.Start(t, "a"))
	sizes := []int32{1, 10, 100, 1000, 100000}
	req := &testgrpc.StreamingOutputCallRequest{}
	for _, n := range sizes {
		req.ResponseParameters = append(req.ResponseParameters, &testgrpc.ResponseParameters{Size: n, IntervalUs: 1000})
	}
	st, err := c.StreamingOutputCall(ctxTimeout(t), req)
	if err != nil {
		t.Fatal(err)
	}
	for i, n := range sizes {
		m, err := st.Recv()
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if len(m.GetPayload().GetBody()) != int(n) {
			t.Errorf("message %d: %d bytes, want %d", i, len(m.GetPayload().GetBody()), n)
		}
	}
	if _, err := st.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("end of stream: %v", err)
	}
	if got := st.Trailer().Get(grpctest.TrailerKey); len(got) != 1 || got[0] != "done-a" {
		t.Errorf("trailer %v", st.Trailer())
	}
}

// TestQuietStream checks that a server stream whose first message (and so its response header)
// comes later than the upstream response-header timeout is not cut off: that timeout is for
// HTTP/1.1 upstreams, and a gRPC watch may stay quiet as long as it likes.
func TestQuietStream(t *testing.T) {
	be := grpctest.Start(t, "a")
	addrs := startProxyWith(t, proxy.Limits{UpstreamResponseHeaderTimeout: 100 * time.Millisecond},
		[]*irv1.Listener{plainListener("l", server("", vhost("",
			grpcRoute("all", grpcroute.Match{}, backend("grpc", 1)))))},
		[]*irv1.Cluster{h2cCluster("grpc", be)})
	c := grpctest.Dial(t, addrs[0])
	req := &testgrpc.StreamingOutputCallRequest{ResponseParameters: []*testgrpc.ResponseParameters{
		{Size: 3, IntervalUs: 400_000}}}
	st, err := c.StreamingOutputCall(ctxTimeout(t), req)
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.Recv()
	if err != nil {
		t.Fatalf("first message after a quiet 400 ms: %v", err)
	}
	if len(m.GetPayload().GetBody()) != 3 {
		t.Errorf("message of %d bytes, want 3", len(m.GetPayload().GetBody()))
	}
	if _, err := st.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("end of stream: %v", err)
	}
}

// TestClientStreaming checks that every message of a client stream reaches the backend.
func TestClientStreaming(t *testing.T) {
	c := catchAll(t, grpctest.Start(t, "a"))
	st, err := c.StreamingInputCall(ctxTimeout(t))
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, n := range []int{3, 0, 70000, 5} {
		total += n
		if err := st.Send(&testgrpc.StreamingInputCallRequest{Payload: &testgrpc.Payload{Body: make([]byte, n)}}); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := st.CloseAndRecv()
	if err != nil {
		t.Fatal(err)
	}
	if int(resp.GetAggregatedPayloadSize()) != total {
		t.Errorf("backend counted %d bytes, sent %d", resp.GetAggregatedPayloadSize(), total)
	}
}

// TestBidiStreaming plays ping-pong: each answer must arrive before the next message is sent, so
// nothing on the path may buffer a direction until the other ends.
func TestBidiStreaming(t *testing.T) {
	c := catchAll(t, grpctest.Start(t, "a"))
	st, err := c.FullDuplexCall(ctxTimeout(t))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		body := []byte{byte(i), 'x'}
		if err := st.Send(&testgrpc.StreamingOutputCallRequest{Payload: &testgrpc.Payload{Body: body},
			ResponseParameters: []*testgrpc.ResponseParameters{{}}}); err != nil {
			t.Fatal(err)
		}
		m, err := st.Recv()
		if err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		if string(m.GetPayload().GetBody()) != string(body) {
			t.Fatalf("round %d: got %q", i, m.GetPayload().GetBody())
		}
	}
	if err := st.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("end of stream: %v", err)
	}
	if got := st.Trailer().Get(grpctest.TrailerKey); len(got) != 1 {
		t.Errorf("trailer %v", st.Trailer())
	}
}

// TestDeadline checks that the client's deadline travels to the backend (grpc-timeout) and that
// the call ends with DEADLINE_EXCEEDED when it passes.
func TestDeadline(t *testing.T) {
	be := grpctest.Start(t, "a")
	c := catchAll(t, be)
	ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(context.Background(), grpctest.WaitKey, "1"), 300*time.Millisecond)
	defer cancel()
	_, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{})
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("want DeadlineExceeded, got %v", err)
	}
	select {
	case d := <-be.Deadlines:
		if !d.Set || d.Remaining <= 0 || d.Remaining > 300*time.Millisecond {
			t.Errorf("backend saw deadline %+v", d)
		}
		if d.Err == nil {
			t.Error("the backend's call did not end")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the backend's call never ended")
	}
}

// TestStreamCancel checks that a client cancelling a stream ends the backend's side.
func TestStreamCancel(t *testing.T) {
	c := catchAll(t, grpctest.Start(t, "a"))
	ctx, cancel := context.WithCancel(ctxTimeout(t))
	st, err := c.FullDuplexCall(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(&testgrpc.StreamingOutputCallRequest{ResponseParameters: []*testgrpc.ResponseParameters{{Size: 1}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := st.Recv(); status.Code(err) != codes.Canceled {
		t.Fatalf("after cancel: %v", err)
	}
}
