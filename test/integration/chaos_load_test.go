package integration

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
)

// The chaos tests (chaos_test.go) keep steady traffic of every kind running through the proxies
// while they break things, and count every request and connection that failed. This file is
// that traffic: chaosLoad, and the backends it talks to.

// chaosTarget is one proxy's listeners the load goes through.
type chaosTarget struct {
	name     string
	ip       string
	httpPort int // HTTPRoute web.example (requests, WebSockets at /ws), GRPCRoute grpc.example
	tcpPort  int // TCPRoute to an echo server
}

// loadKind counts one kind of traffic. Requests are sent and fail; long-lived connections are
// opened, exchange messages, and break (a broken one is not reopened: each is meant to survive).
type loadKind struct {
	name             string
	sent, failed     atomic.Int64
	opened, broken   atomic.Int64
	messages         atomic.Int64
	mu               sync.Mutex
	firstErr         error
	firstErrAt       time.Time
	streamConnection bool
}

func (k *loadKind) fail(err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.firstErr == nil {
		k.firstErr, k.firstErrAt = err, time.Now()
	}
}

func (k *loadKind) String() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.streamConnection {
		s := fmt.Sprintf("%s: %d connections, %d broken, %d messages", k.name, k.opened.Load(), k.broken.Load(), k.messages.Load())
		if k.firstErr != nil {
			s += fmt.Sprintf(" (first break at %s: %v)", k.firstErrAt.Format("15:04:05.000"), k.firstErr)
		}
		return s
	}
	s := fmt.Sprintf("%s: %d requests, %d failed", k.name, k.sent.Load(), k.failed.Load())
	if k.firstErr != nil {
		s += fmt.Sprintf(" (first failure at %s: %v)", k.firstErrAt.Format("15:04:05.000"), k.firstErr)
	}
	return s
}

// chaosLoad runs, against every target: a keep-alive HTTP client and a new-connection-per-request
// client (each a request every pace), and streams long-lived WebSocket, gRPC bidi and TCP
// connections that each exchange a message every streamPace.
type chaosLoad struct {
	kinds     []*loadKind
	keepAlive *loadKind
	newConn   *loadKind
	ws        *loadKind
	grpc      *loadKind
	tcp       *loadKind
	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	started   time.Time
}

const (
	loadPace       = 20 * time.Millisecond
	streamPace     = 100 * time.Millisecond
	streamsPerKind = 2
)

// startChaosLoad opens every long-lived connection (failing the test if one cannot be opened:
// the load must start clean) and starts the request loops.
func startChaosLoad(t testing.TB, targets []chaosTarget) *chaosLoad {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	l := &chaosLoad{ctx: ctx, cancel: cancel, started: time.Now(),
		keepAlive: &loadKind{name: "HTTP keep-alive"}, newConn: &loadKind{name: "HTTP new connection per request"},
		ws: &loadKind{name: "WebSocket", streamConnection: true}, grpc: &loadKind{name: "gRPC bidi stream", streamConnection: true},
		tcp: &loadKind{name: "TCP stream", streamConnection: true}}
	l.kinds = []*loadKind{l.keepAlive, l.newConn, l.ws, l.grpc, l.tcp}
	t.Cleanup(l.stopQuietly)
	for _, tg := range targets {
		keepAlive := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
		t.Cleanup(keepAlive.CloseIdleConnections)
		l.requests(l.keepAlive, keepAlive, tg)
		l.requests(l.newConn, client, tg)
		for i := range streamsPerKind {
			l.stream(t, l.ws, tg, i, openWebSocket)
			l.stream(t, l.grpc, tg, i, openGRPCStream)
			l.stream(t, l.tcp, tg, i, openTCPStream)
		}
	}
	return l
}

func (l *chaosLoad) requests(k *loadKind, c *http.Client, tg chaosTarget) {
	l.requestsTo(k, c, tg.name, fmt.Sprintf("http://%s/", net.JoinHostPort(tg.ip, strconv.Itoa(tg.httpPort))), "web.example")
}

// kind adds a kind of traffic to the report; a test that sends more than chaosLoad's own
// (TestChaosConfigChurn) adds its streams with kind and requestsTo before it stops the load.
func (l *chaosLoad) kind(name string) *loadKind {
	k := &loadKind{name: name}
	l.kinds = append(l.kinds, k)
	return k
}

// requestsTo sends a GET for host to url on c every loadPace until the load stops, counting
// each one that did not answer 200 in k.
func (l *chaosLoad) requestsTo(k *loadKind, c *http.Client, who, url, host string) {
	l.wg.Go(func() {
		tick := time.NewTicker(loadPace)
		defer tick.Stop()
		for {
			select {
			case <-l.ctx.Done():
				return
			case <-tick.C:
			}
			k.sent.Add(1)
			if err := getOK(l.ctx, c, url, host); err != nil {
				if l.ctx.Err() != nil {
					k.sent.Add(-1) // cut short by stop, not by the proxy
					return
				}
				k.failed.Add(1)
				k.fail(fmt.Errorf("%s: %w", who, err))
			}
		}
	})
}

func getOK(ctx context.Context, c *http.Client, url, host string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Host = host
	res, err := c.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return err
	}
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d: %s", res.StatusCode, strings.TrimSpace(string(body)))
	}
	return nil
}

// exchanger sends one message on a long-lived connection and checks its echo.
type exchanger interface {
	exchange(msg string) error
	close()
}

type opener func(ctx context.Context, tg chaosTarget) (exchanger, error)

// stream opens one long-lived connection and exchanges a message on it every streamPace until
// the load stops or the connection breaks.
func (l *chaosLoad) stream(t testing.TB, k *loadKind, tg chaosTarget, i int, open opener) {
	t.Helper()
	c, err := open(l.ctx, tg)
	if err != nil {
		t.Fatalf("%s to %s: %v", k.name, tg.name, err)
	}
	if err := c.exchange("hello"); err != nil {
		t.Fatalf("%s to %s: first message: %v", k.name, tg.name, err)
	}
	k.opened.Add(1)
	l.wg.Go(func() {
		defer c.close()
		tick := time.NewTicker(streamPace)
		defer tick.Stop()
		for n := 0; ; n++ {
			select {
			case <-l.ctx.Done():
				return
			case <-tick.C:
			}
			if err := c.exchange(fmt.Sprintf("%s-%d-%d", tg.name, i, n)); err != nil {
				if l.ctx.Err() != nil {
					return
				}
				k.broken.Add(1)
				k.fail(fmt.Errorf("%s #%d after %d messages: %w", tg.name, i, n, err))
				return
			}
			k.messages.Add(1)
		}
	})
}

// more waits until every kind of traffic has made n more requests or messages: a test that
// breaks something quickly keeps the load going over the aftermath before it stops it.
func (l *chaosLoad) more(t testing.TB, n int64) {
	t.Helper()
	count := func(k *loadKind) int64 { return k.sent.Load() + k.messages.Load() }
	from := make([]int64, len(l.kinds))
	for i, k := range l.kinds {
		from[i] = count(k)
	}
	eventually(t, fmt.Sprintf("%d more requests or messages of every kind of load", n), func() error {
		for i, k := range l.kinds {
			if got := count(k) - from[i]; got < n {
				return fmt.Errorf("%s: %d more", k.name, got)
			}
		}
		return nil
	})
}

// stop ends the load and returns the counts.
func (l *chaosLoad) stop() chaosReport {
	l.cancel()
	l.wg.Wait()
	r := chaosReport{duration: time.Since(l.started)}
	for _, k := range l.kinds {
		r.lines = append(r.lines, k.String())
		r.requests += k.sent.Load()
		r.failed += k.failed.Load()
		r.connections += k.opened.Load()
		r.broken += k.broken.Load()
	}
	return r
}

func (l *chaosLoad) stopQuietly() { l.cancel(); l.wg.Wait() }

// chaosReport is what the load saw.
type chaosReport struct {
	duration            time.Duration
	requests, failed    int64
	connections, broken int64
	lines               []string
}

// log prints the report (the figures docs/reliability.md quotes) and fails the test on any
// failed request or broken connection.
func (r chaosReport) requireClean(t testing.TB, what string) {
	t.Helper()
	t.Logf("%s: load for %s: %d requests, %d failed; %d long-lived connections, %d survived\n  %s",
		what, r.duration.Round(time.Millisecond), r.requests, r.failed, r.connections, r.connections-r.broken,
		strings.Join(r.lines, "\n  "))
	if r.failed > 0 || r.broken > 0 {
		t.Errorf("%s: %d requests failed and %d long-lived connections broke:\n  %s", what, r.failed, r.broken, strings.Join(r.lines, "\n  "))
	}
	if r.requests < 10 {
		t.Errorf("%s: only %d requests sent: the load did not run", what, r.requests)
	}
}

// webSocket is a WebSocket through the proxy to the backend's /ws echo.
type webSocket struct {
	ctx context.Context
	c   *websocket.Conn
}

func openWebSocket(ctx context.Context, tg chaosTarget) (exchanger, error) {
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(dctx, fmt.Sprintf("ws://%s/ws", net.JoinHostPort(tg.ip, strconv.Itoa(tg.httpPort))),
		&websocket.DialOptions{Host: "web.example", HTTPClient: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}})
	if err != nil {
		return nil, err
	}
	return &webSocket{ctx: ctx, c: c}, nil
}

func (w *webSocket) exchange(msg string) error {
	ctx, cancel := context.WithTimeout(w.ctx, 5*time.Second)
	defer cancel()
	if err := w.c.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
		return err
	}
	_, got, err := w.c.Read(ctx)
	if err == nil && string(got) != msg {
		err = fmt.Errorf("echo %q, sent %q", got, msg)
	}
	return err
}

func (w *webSocket) close() { _ = w.c.CloseNow() }

// grpcStream is a FullDuplexCall through the proxy's GRPCRoute to a grpc-go backend.
type grpcStream struct {
	cc *grpc.ClientConn
	st grpc.BidiStreamingClient[testgrpc.StreamingOutputCallRequest, testgrpc.StreamingOutputCallResponse]
}

func openGRPCStream(ctx context.Context, tg chaosTarget) (exchanger, error) {
	cc, err := grpc.NewClient("passthrough:///"+net.JoinHostPort(tg.ip, strconv.Itoa(tg.httpPort)),
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithAuthority("grpc.example"))
	if err != nil {
		return nil, err
	}
	st, err := testgrpc.NewTestServiceClient(cc).FullDuplexCall(ctx)
	if err != nil {
		_ = cc.Close()
		return nil, err
	}
	return &grpcStream{cc: cc, st: st}, nil
}

func (g *grpcStream) exchange(msg string) error {
	if err := g.st.Send(&testgrpc.StreamingOutputCallRequest{Payload: &testgrpc.Payload{Body: []byte(msg)},
		ResponseParameters: []*testgrpc.ResponseParameters{{}}}); err != nil {
		return err
	}
	// A stuck stream is caught by the report: its messages stop counting, and stop's cancel
	// ends the Recv.
	res, err := g.st.Recv()
	if err == nil && string(res.GetPayload().GetBody()) != msg {
		err = fmt.Errorf("echo %q, sent %q", res.GetPayload().GetBody(), msg)
	}
	return err
}

func (g *grpcStream) close() { _ = g.cc.Close() }

// tcpStream is a TCP connection through the proxy's TCPRoute to an echo server.
type tcpStream struct {
	c  net.Conn
	br *bufio.Reader
}

func openTCPStream(ctx context.Context, tg chaosTarget) (exchanger, error) {
	d := &net.Dialer{Timeout: 5 * time.Second}
	c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(tg.ip, strconv.Itoa(tg.tcpPort)))
	if err != nil {
		return nil, err
	}
	return &tcpStream{c: c, br: bufio.NewReader(c)}, nil
}

func (s *tcpStream) exchange(msg string) error {
	_ = s.c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(s.c, msg+"\n"); err != nil {
		return err
	}
	line, err := s.br.ReadString('\n')
	if err == nil && strings.TrimSuffix(line, "\n") != msg {
		err = fmt.Errorf("echo %q, sent %q", line, msg)
	}
	return err
}

func (s *tcpStream) close() { _ = s.c.Close() }

// startChaosWeb is an HTTP backend on addr: it answers every request with its name (X-Backend),
// and echoes WebSocket messages at /ws. Unlike startBackend it has no idle bound on upgraded
// connections, which must outlive a long outage.
func startChaosWeb(t testing.TB, name, addr string) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("backend %s: %v", name, err)
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ws" {
			echoWebSocket(w, r)
			return
		}
		w.Header().Set("X-Backend", name)
		fmt.Fprintf(w, "%s %s", name, r.URL.Path)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
}

func echoWebSocket(w http.ResponseWriter, r *http.Request) {
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true}) // the Origin is the gateway's host
	if err != nil {
		return
	}
	defer func() { _ = c.CloseNow() }()
	for {
		typ, msg, err := c.Read(r.Context())
		if err != nil {
			return
		}
		if err := c.Write(r.Context(), typ, msg); err != nil {
			return
		}
	}
}

// startEchoServer is a TCP backend on addr that echoes what it reads, with no idle bound.
func startEchoServer(t testing.TB, addr string) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("echo server: %v", err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				if !errors.Is(err, net.ErrClosed) {
					t.Logf("echo server: %v", err)
				}
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
}
