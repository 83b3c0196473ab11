package standalone

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/coxswain-labs/coxswain/controller/adminapi"
	"github.com/coxswain-labs/coxswain/core/admin"
)

// AdminHandler serves the standalone admin endpoints (version is the build's, for /api/v1/health):
//
//	/healthz  200 while the process runs
//	/readyz   200 once the first snapshot is applied, 503 before
//	/status   JSON: the version serving, the last reload's error, the listeners that cannot be
//	          bound now, and the Report (the status the controller would write, with those
//	          listeners Programmed=False, the problems and the documents left out)
//	/api/v1/health, /api/v1/routing, /api/v1/routing/{namespace}/{gateway}, /api/v1/problems:
//	          the admin API (docs/admin-api.md)
//	/stats    JSON: the counters of the listeners that keep some, by listener (UDP sessions and
//	          datagrams dropped by the session cap, stream connections accepted and dropped)
//
// It is meant for a loopback address: it exposes the configuration, not secrets.
func AdminHandler(r *Runner, version string) http.Handler {
	mux := http.NewServeMux()
	adminapi.RegisterTranslation(mux, r.Latest(), "no configuration has been applied yet (see /status)")
	mux.HandleFunc("GET /api/v1/health", func(w http.ResponseWriter, _ *http.Request) {
		st := r.State()
		detail := map[string]any{"version": st.Version}
		if st.ApplyError != "" {
			detail["applyError"] = st.ApplyError
		}
		ready := false
		select {
		case <-r.Ready():
			ready = true
		default:
		}
		subs := []admin.Subsystem{{Name: "configuration", Ready: ready, Detail: detail}}
		if unbound := r.Unbound(); len(unbound) > 0 {
			subs = append(subs, admin.Subsystem{Name: "listeners", Ready: true, Detail: map[string]any{"unbound": unbound}})
		}
		admin.WriteJSON(w, admin.Health{Component: "serve", Version: version, Ready: ready, Subsystems: subs})
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		select {
		case <-r.Ready():
			_, _ = w.Write([]byte("ready " + r.State().Version + "\n"))
		default:
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("not ready: no configuration applied yet\n"))
		}
	})
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
		st := r.State()
		unbound := r.Unbound()
		body := struct {
			Version    string            `json:"version"`
			ApplyError string            `json:"applyError,omitempty"`
			Unbound    []UnboundListener `json:"unboundListeners,omitempty"`
			Time       time.Time         `json:"time"`
			Report     *Report           `json:"report,omitempty"`
		}{st.Version, st.ApplyError, unbound, st.Time, withUnbound(st.Report, unbound, time.Now())}
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(body)
	})
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, _ *http.Request) {
		stats := map[string]map[string]int64{}
		if sr, ok := r.opts.Engine.(interface {
			ListenerStats() map[string]map[string]int64
		}); ok {
			stats = sr.ListenerStats()
		}
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(stats)
	})
	return mux
}
