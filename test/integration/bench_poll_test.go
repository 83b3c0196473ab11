package integration

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

// How BenchmarkPropagation sees a route served. Until session 15 it polled with the harness's
// client, a new connection per GET, every millisecond, and took the time the 200 came back: each
// figure then included the TCP handshake and the request's round trip (~1–3 ms on the loaded
// machine), and the polls' accepts ran on the proxy being measured (in-process: the controller).
// The poller below keeps one connection open (the proxy picks the table per request, so a kept
// connection sees a new route as soon as a new one would) and takes the time the successful GET
// was sent: the route was served no later than that, and no earlier than the previous GET was
// sent, so the polling adds at most pollEvery (about half of it on average) and nothing else.

// pollEvery is how long the poller waits between GETs.
const pollEvery = time.Millisecond

// pollDials counts the poller's connections: one for the whole benchmark if keep-alive holds.
var pollDials atomic.Int64

var pollClient = &http.Client{
	Timeout: 5 * time.Second,
	Transport: &http.Transport{
		MaxIdleConnsPerHost: 1,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			pollDials.Add(1)
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		},
	},
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// firstOK polls host until it answers 200 from backend and returns when the successful GET was
// sent.
func firstOK(b *testing.B, host, backend string) time.Time {
	return firstOKWithin(b, host, backend, waitFor, pollEvery)
}

// firstOKWithin is firstOK with its wait and polling interval.
func firstOKWithin(b *testing.B, host, backend string, wait, poll time.Duration) time.Time {
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		sent := time.Now()
		if status, from, err := pollGet(host); err == nil && status == 200 && from == backend {
			return sent
		}
		time.Sleep(poll)
	}
	b.Fatalf("%s not served by %s within %s", host, backend, wait)
	return time.Time{}
}

// pollGet sends GET / with Host host to the benchmark's listener on the kept connection.
func pollGet(host string) (int, string, error) {
	req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("http://%s:%d/", gatewayIP, benchPort), nil)
	if err != nil {
		return 0, "", err
	}
	req.Host = host
	res, err := pollClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	// Read to the end, so the connection can carry the next GET.
	if _, err := io.Copy(io.Discard, res.Body); err != nil {
		return 0, "", err
	}
	return res.StatusCode, res.Header.Get("X-Backend"), nil
}
