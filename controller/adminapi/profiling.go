package adminapi

import (
	"net/http"
	"net/http/pprof"
)

// ProfilingPath is where RegisterProfiling serves net/http/pprof: under /api/ so that
// --admin-auth guards it like the rest of the admin API (a CPU profile costs the controller CPU,
// and a heap profile names its code paths).
const ProfilingPath = "/api/v1/debug/pprof/"

// RegisterProfiling serves the Go runtime's profiles on mux (`--admin-pprof`): heap, allocs,
// goroutine, CPU (profile?seconds=N), trace and the index, as net/http/pprof names them, e.g.
// `go tool pprof http://127.0.0.1:9902/api/v1/debug/pprof/heap`. pprof's handlers expect
// /debug/pprof/, hence the prefix stripped.
func RegisterProfiling(mux *http.ServeMux) {
	strip := func(h http.HandlerFunc) http.Handler { return http.StripPrefix("/api/v1", h) }
	mux.Handle("GET "+ProfilingPath, strip(pprof.Index))
	mux.Handle("GET "+ProfilingPath+"cmdline", strip(pprof.Cmdline))
	mux.Handle("GET "+ProfilingPath+"profile", strip(pprof.Profile))
	mux.Handle("GET "+ProfilingPath+"symbol", strip(pprof.Symbol))
	mux.Handle("POST "+ProfilingPath+"symbol", strip(pprof.Symbol))
	mux.Handle("GET "+ProfilingPath+"trace", strip(pprof.Trace))
}
