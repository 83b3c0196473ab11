// Command echo is the quickstart's backend: one process serving several loopback ports, each
// answering every request with its name, the request's method, host, path, query and headers as
// JSON, so you can see which backend a route chose and what the proxy sent it.
//
//	echo -listen app-v1=127.0.0.1:9001,app-v2=127.0.0.1:9002,web=127.0.0.1:9003
//
// A path that ends in /status/<code> (100-599) is answered with that status, so an example can
// make a backend fail on demand (the circuit breaker's). A listen address without a name is named
// after its port. Only loopback addresses are accepted:
// this is a demo backend, not something to expose.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// reply is what every request gets back.
type reply struct {
	Backend string            `json:"backend"`
	Method  string            `json:"method"`
	Host    string            `json:"host"`
	Path    string            `json:"path"`
	Query   string            `json:"query,omitempty"`
	Headers map[string]string `json:"headers"`
}

func main() {
	listen := flag.String("listen", "app-v1=127.0.0.1:9001,app-v2=127.0.0.1:9002,web=127.0.0.1:9003",
		"comma-separated [name=]address list of loopback addresses to serve")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *listen); err != nil {
		log.Fatalf("echo: %v", err)
	}
}

func run(ctx context.Context, spec string) error {
	var servers []*http.Server
	for _, item := range strings.Split(spec, ",") {
		name, addr, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok {
			addr, name = name, ""
		}
		if err := checkLoopback(addr); err != nil {
			return err
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return err
		}
		if name == "" {
			_, name, _ = net.SplitHostPort(ln.Addr().String())
		}
		srv := &http.Server{Handler: handler(name), ReadHeaderTimeout: 5 * time.Second}
		servers = append(servers, srv)
		log.Printf("echo backend %q listening on http://%s", name, ln.Addr())
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Printf("echo backend %q: %v", name, err)
			}
		}()
	}
	<-ctx.Done()
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, s := range servers {
		_ = s.Shutdown(shutdown)
	}
	return nil
}

func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("listen address %q: %w", addr, err)
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("listen address %q: only loopback addresses (127.0.0.0/8, ::1) are allowed", addr)
	}
	return nil
}

func handler(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rep := reply{Backend: name, Method: r.Method, Host: r.Host, Path: r.URL.Path, Query: r.URL.RawQuery,
			Headers: make(map[string]string, len(r.Header))}
		for k, v := range r.Header {
			rep.Headers[strings.ToLower(k)] = strings.Join(v, ", ")
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Echo-Backend", name)
		if code, ok := statusOf(r.URL.Path); ok {
			w.WriteHeader(code)
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
	})
}

// statusOf is the status a path ending in /status/<code> asks for.
func statusOf(path string) (int, bool) {
	i := strings.LastIndex(path, "/status/")
	if i < 0 {
		return 0, false
	}
	n, err := strconv.Atoi(path[i+len("/status/"):])
	if err != nil || n < 100 || n > 599 {
		return 0, false
	}
	return n, true
}
