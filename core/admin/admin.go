// Package admin serves the endpoints every Coxswain process has: /healthz (the process is up),
// /readyz (it can do its job), /metrics (Prometheus, series prefixed coxswain_) and /api/v1/health
// (the subsystems, the build version and, for a controller, whether it leads). A process adds its
// own endpoints to the mux (the controller's /api/v1/fleet). It imports no Kubernetes code: the
// proxy uses it.
package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"
)

// Subsystem is one part of a process and whether it is ready.
type Subsystem struct {
	Name  string `json:"name"`
	Ready bool   `json:"ready"`
	// Detail says more: what it waits for, what it is connected to.
	Detail any `json:"detail,omitempty"`
}

// Options describe the process the endpoints report on.
type Options struct {
	// Component is "controller" or "proxy".
	Component string
	Version   string
	// Subsystems reports the parts of the process; the process is ready when all are.
	Subsystems func() []Subsystem
	// Leader says whether this controller leads; nil for a process that does not elect.
	Leader func() bool
	// Identity is this replica's Lease identity; LeaderIdentity the holder's last observed.
	Identity       string
	LeaderIdentity func() string
	// Gatherer is what /metrics exposes; NewRegistry makes one.
	Gatherer prometheus.Gatherer
}

// NewRegistry is a Prometheus registry with the Go runtime and process collectors, which give
// every process its CPU and memory series.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Health is the body of /api/v1/health.
type Health struct {
	Component string `json:"component"`
	Version   string `json:"version"`
	Ready     bool   `json:"ready"`
	Leader    *bool  `json:"leader,omitempty"`
	// Identity and LeaderIdentity are a controller's Lease identity and the current holder's.
	Identity       string      `json:"identity,omitempty"`
	LeaderIdentity string      `json:"leaderIdentity,omitempty"`
	Subsystems     []Subsystem `json:"subsystems"`
}

// NewMux returns a mux serving the common endpoints; callers may add their own.
func NewMux(opts Options) *http.ServeMux {
	mux := http.NewServeMux()
	health := func() Health {
		h := Health{Component: opts.Component, Version: opts.Version, Ready: true, Subsystems: []Subsystem{}, Identity: opts.Identity}
		if opts.LeaderIdentity != nil {
			h.LeaderIdentity = opts.LeaderIdentity()
		}
		if opts.Subsystems != nil {
			h.Subsystems = opts.Subsystems()
		}
		for _, s := range h.Subsystems {
			h.Ready = h.Ready && s.Ready
		}
		if opts.Leader != nil {
			l := opts.Leader()
			h.Leader = &l
		}
		return h
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		h := health()
		if !h.Ready {
			w.WriteHeader(http.StatusServiceUnavailable)
			for _, s := range h.Subsystems {
				if !s.Ready {
					fmt.Fprintf(w, "%s: not ready\n", s.Name)
				}
			}
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /api/v1/health", func(w http.ResponseWriter, _ *http.Request) { WriteJSON(w, health()) })
	if opts.Gatherer != nil {
		mux.Handle("GET /metrics", promhttp.HandlerFor(opts.Gatherer, promhttp.HandlerOpts{}))
	}
	return mux
}

// WriteJSON writes v as indented JSON.
func WriteJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// Error is the body of every /api/v1 error (docs/admin-api.md).
type Error struct {
	Error  string `json:"error"`
	Status int    `json:"status"`
}

// WriteError writes an Error with status code.
func WriteError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(Error{Error: msg, Status: code})
}

// Server is a running admin server.
type Server struct {
	srv *http.Server
	ln  net.Listener
}

// Serve listens on addr and serves h in the background.
func Serve(addr string, h http.Handler, log *zap.Logger) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &Server{srv: &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}, ln: ln}
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("admin server stopped", zap.Error(err))
		}
	}()
	log.Info("admin endpoints listening", zap.String("address", ln.Addr().String()),
		zap.Strings("paths", []string{"/healthz", "/readyz", "/metrics", "/api/v1/health"}))
	return s, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Close stops the server.
func (s *Server) Close() error { return s.srv.Close() }
