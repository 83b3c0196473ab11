// Command authserver is the policies example's external authorization service (forward-auth over
// HTTP): a request that carries `Authorization: Bearer <token>` with one of its tokens is allowed
// (200, with X-Auth-User naming the token's user), anything else is refused with 401, a
// WWW-Authenticate challenge and a JSON body, which Coxswain returns to the client as they are.
//
//	authserver -listen 127.0.0.1:9361 -tokens alice=demo-token-alice,bob=demo-token-bob
//
// Only loopback addresses are accepted: this is a demo, not something to expose.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:9361", "loopback address to serve")
	tokens := flag.String("tokens", "alice=demo-token-alice,bob=demo-token-bob", "comma-separated user=token list")
	flag.Parse()
	users, err := parseTokens(*tokens)
	if err != nil {
		log.Fatalf("authserver: %v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *listen, users); err != nil {
		log.Fatalf("authserver: %v", err)
	}
}

func parseTokens(spec string) (map[string]string, error) {
	users := map[string]string{} // token → user
	for _, item := range strings.Split(spec, ",") {
		user, token, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok || user == "" || token == "" {
			return nil, fmt.Errorf("token %q: want user=token", item)
		}
		users[token] = user
	}
	return users, nil
}

func run(ctx context.Context, addr string, users map[string]string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("listen address %q: only loopback addresses are allowed", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: handler(users), ReadHeaderTimeout: 5 * time.Second}
	log.Printf("authserver listening on http://%s", ln.Addr())
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// handler decides on the request Coxswain replays: its method, host, path and headers, no body.
func handler(users map[string]string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if user, known := users[token]; ok && known {
			w.Header().Set("X-Auth-User", user)
			w.WriteHeader(http.StatusOK)
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="coxswain-demo"`)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = fmt.Fprintf(w, "{\"error\":\"a valid bearer token is required for %s %s\"}\n", r.Method, r.URL.Path)
	})
}
