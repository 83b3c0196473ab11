// Command h3load is the HTTP/3 load generator of the benchmarks: a closed loop of GET requests
// over -conns QUIC connections (quic-go's http3 client), -streams requests in flight on each,
// for -duration. It prints one JSON line: requests done, failures, requests/s, p50 and p99.
//
//	h3load -url https://127.0.0.1:18110/12 -conns 16 -streams 1 -duration 5s -insecure
//
// Every connection is set up (handshake and one request) before the clock starts, so the
// figures are keep-alive requests, not handshakes. -once sends one request and prints the
// response instead (curl for HTTP/3, where curl lacks it); -connect dials another address than
// the URL's host, which stays the TLS server name and the Host:
//
//	h3load -once -url https://shop.example.com:8443/ -connect 127.0.0.1:8443 -ca examples/http3/certs/shop.crt
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
)

type result struct {
	Done     int64   `json:"done"`
	Failures int64   `json:"failures"`
	RPS      float64 `json:"rps"`
	P50US    float64 `json:"p50_us"`
	P99US    float64 `json:"p99_us"`
	// FirstError is the first failure's error, for the runner's log.
	FirstError string `json:"first_error,omitempty"`
}

func main() {
	url := flag.String("url", "", "URL to GET (https://...)")
	conns := flag.Int("conns", 16, "QUIC connections")
	streams := flag.Int("streams", 1, "requests in flight per connection")
	duration := flag.Duration("duration", 5*time.Second, "how long to send")
	insecure := flag.Bool("insecure", false, "do not verify the server's certificate")
	caFile := flag.String("ca", "", "PEM file of the CA to trust")
	serverName := flag.String("servername", "", "TLS server name (SNI); default: the URL's host")
	connect := flag.String("connect", "", "host:port to dial instead of the URL's")
	once := flag.Bool("once", false, "send one request and print the response")
	flag.Parse()
	if *url == "" {
		fmt.Fprintln(os.Stderr, "h3load: -url is required")
		os.Exit(2)
	}
	tlsCfg := &tls.Config{InsecureSkipVerify: *insecure, ServerName: *serverName} //nolint:gosec // a benchmark against its own certificate
	if *caFile != "" {
		pem, err := os.ReadFile(*caFile)
		if err != nil {
			fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pem)
		tlsCfg.RootCAs = pool
	}
	dial = *connect
	if *once {
		if err := one(*url, tlsCfg); err != nil {
			fatal(err)
		}
		return
	}
	r, err := run(*url, *conns, *streams, *duration, tlsCfg)
	if err != nil {
		fatal(err)
	}
	_ = json.NewEncoder(os.Stdout).Encode(r)
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "h3load:", err)
	os.Exit(1)
}

// run opens conns connections (one http3.Transport each, so that each has its own QUIC
// connection), warms each with a request, then runs the closed loop.
func run(url string, conns, streams int, d time.Duration, tlsCfg *tls.Config) (result, error) {
	clients := make([]*http.Client, conns)
	for i := range clients {
		tr := newTransport(tlsCfg)
		defer func() { _ = tr.Close() }()
		clients[i] = &http.Client{Transport: tr, Timeout: 10 * time.Second}
		if err := get(context.Background(), clients[i], url); err != nil {
			return result{}, fmt.Errorf("connection %d: %w", i, err)
		}
	}
	var (
		done, failed atomic.Int64
		firstErr     atomic.Pointer[string]
		mu           sync.Mutex
		lat          []time.Duration
		wg           sync.WaitGroup
	)
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	start := time.Now()
	for _, c := range clients {
		for range streams {
			wg.Go(func() {
				own := make([]time.Duration, 0, 1<<14)
				for ctx.Err() == nil {
					t0 := time.Now()
					err := get(ctx, c, url)
					if ctx.Err() != nil {
						break // the deadline cut this request: not a failure
					}
					if err != nil {
						failed.Add(1)
						msg := err.Error()
						firstErr.CompareAndSwap(nil, &msg)
						continue
					}
					own = append(own, time.Since(t0))
					done.Add(1)
				}
				mu.Lock()
				lat = append(lat, own...)
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	elapsed := time.Since(start)
	r := result{Done: done.Load(), Failures: failed.Load(), RPS: float64(done.Load()) / elapsed.Seconds()}
	if p := firstErr.Load(); p != nil {
		r.FirstError = *p
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		r.P50US = float64(lat[len(lat)/2].Microseconds())
		r.P99US = float64(lat[len(lat)*99/100].Microseconds())
	}
	return r, nil
}

// dial is -connect: the address every connection dials ("" for the URL's host).
var dial string

func newTransport(tlsCfg *tls.Config) *http3.Transport {
	tr := &http3.Transport{TLSClientConfig: tlsCfg.Clone(), QUICConfig: &quic.Config{MaxIncomingStreams: 1000}}
	if dial != "" {
		tr.Dial = func(ctx context.Context, _ string, tc *tls.Config, qc *quic.Config) (*quic.Conn, error) {
			return quic.DialAddrEarly(ctx, dial, tc, qc)
		}
	}
	return tr
}

// one sends one GET and prints the response's status line, headers and body.
func one(url string, tlsCfg *tls.Config) error {
	tr := newTransport(tlsCfg)
	defer func() { _ = tr.Close() }()
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get(url)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	fmt.Printf("%s %s\n", resp.Proto, resp.Status)
	if err := resp.Header.Write(os.Stdout); err != nil {
		return err
	}
	fmt.Println()
	_, err = io.Copy(os.Stdout, resp.Body)
	return err
}

var errStatus = errors.New("unexpected status")

func get(ctx context.Context, c *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w %d", errStatus, resp.StatusCode)
	}
	return nil
}
