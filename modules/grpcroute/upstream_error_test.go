package grpcroute_test

import (
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/modules/grpcroute"
	"github.com/coxswain-labs/coxswain/modules/grpcroute/grpctest"
)

// TestUpstreamFailsMidStream: a backend that fails after the response header went out (its
// connection dropped, or the stream reset) must end the client's call with UNAVAILABLE, as a
// gRPC client talking to that backend directly would see a lost connection. The messages sent
// before the failure arrive intact.
func TestUpstreamFailsMidStream(t *testing.T) {
	cases := []struct {
		name string
		// start returns the backend's cluster and a func that makes it fail once the first
		// message reached the client.
		start func(t *testing.T) (*irv1.Cluster, func())
	}{
		{"backend connection dropped", func(t *testing.T) (*irv1.Cluster, func()) {
			be := grpctest.Start(t, "a")
			return h2cCluster("grpc", be), be.DropConnections
		}},
		{"backend resets the stream", func(t *testing.T) (*irv1.Cluster, func()) {
			port, reset := startResettingBackend(t)
			return &irv1.Cluster{Name: "grpc", Protocol: irv1.Cluster_H2C,
				Endpoints: []*irv1.Endpoint{{Address: "127.0.0.1", Port: port, Weight: 1}}}, reset
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cl, fail := tc.start(t)
			addrs := startProxy(t, []*irv1.Listener{plainListener("l", server("", vhost("",
				grpcRoute("all", grpcroute.Match{}, backend("grpc", 1)))))}, []*irv1.Cluster{cl})
			c := grpctest.Dial(t, addrs[0])
			st, err := c.StreamingOutputCall(ctxTimeout(t), &testgrpc.StreamingOutputCallRequest{
				ResponseParameters: []*testgrpc.ResponseParameters{{Size: 7}, {Size: 7, IntervalUs: 20_000_000}}})
			if err != nil {
				t.Fatal(err)
			}
			m, err := st.Recv()
			if err != nil || len(m.GetPayload().GetBody()) != 7 {
				t.Fatalf("first message: %v %v", m, err)
			}
			fail()
			_, err = st.Recv()
			if status.Code(err) != codes.Unavailable {
				t.Fatalf("after the backend failed: %v, want Unavailable", err)
			}
		})
	}
}

// TestUpstreamFailsBeforeAnswer: a backend lost before it answered a unary call is UNAVAILABLE
// too (the engine's 502, written as a trailers-only gRPC response).
func TestUpstreamFailsBeforeAnswer(t *testing.T) {
	be := grpctest.Start(t, "a")
	c := catchAll(t, be)
	ctx := metadata.AppendToOutgoingContext(ctxTimeout(t), grpctest.WaitKey, "1")
	done := make(chan error, 1)
	go func() {
		_, err := c.UnaryCall(ctx, &testgrpc.SimpleRequest{})
		done <- err
	}()
	// The call is waiting in the backend once the backend has accepted the proxy's connection
	// and the call's stream; dropping the connections until the call ends covers both.
	for {
		be.DropConnections()
		select {
		case err := <-done:
			if status.Code(err) != codes.Unavailable {
				t.Fatalf("got %v, want Unavailable", err)
			}
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// startResettingBackend is a cleartext HTTP/2 server that answers every gRPC call with a
// response header and one StreamingOutputCallResponse of 7 bytes, then waits for reset to be
// called and resets the stream (RST_STREAM INTERNAL_ERROR, what net/http sends for a handler
// that panics with http.ErrAbortHandler), without trailers.
func startResettingBackend(t *testing.T) (port uint32, reset func()) {
	t.Helper()
	msg, err := proto.Marshal(&testgrpc.StreamingOutputCallResponse{Payload: &testgrpc.Payload{Body: make([]byte, 7)}})
	if err != nil {
		t.Fatal(err)
	}
	frame := make([]byte, 5+len(msg))
	binary.BigEndian.PutUint32(frame[1:5], uint32(len(msg)))
	copy(frame[5:], msg)
	now := make(chan struct{})
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Protocols: &p, ReadHeaderTimeout: 5 * time.Second,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/grpc")
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write(frame)
			http.NewResponseController(w).Flush()
			select {
			case <-now:
			case <-r.Context().Done():
			}
			panic(http.ErrAbortHandler)
		})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return uint32(ln.Addr().(*net.TCPAddr).Port), func() { close(now) }
}
