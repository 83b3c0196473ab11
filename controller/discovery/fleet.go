package discovery

import (
	"bytes"
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"sort"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/coxswain-labs/coxswain/core/admin"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// Fleet is what the leader knows about its proxies: GET /api/v1/fleet.
type Fleet struct {
	Leader bool `json:"leader"`
	// Sequence and Version are those of the latest snapshot published.
	Sequence    uint64         `json:"sequence"`
	Version     string         `json:"version,omitempty"`
	PublishedAt time.Time      `json:"publishedAt,omitzero"`
	Proxies     []ProxyView    `json:"proxies"`
	Gateways    []GatewayState `json:"gateways"`
}

// ProxyView is one connected proxy.
type ProxyView struct {
	Node     string `json:"node"`
	SPIFFEID string `json:"spiffeID"`
	Mode     string `json:"mode"`
	Gateway  string `json:"gateway,omitempty"`
	Build    string `json:"build,omitempty"`
	Modules  int    `json:"modules"`
	// ModuleIDs are the module IDs the proxy announced, sorted.
	ModuleIDs []string  `json:"moduleIDs"`
	Connected time.Time `json:"connectedAt"`
	CertUntil time.Time `json:"certificateNotAfter"`
	// AckedVersion and AckedSequence are the newest snapshot the proxy acknowledged.
	AckedVersion  string    `json:"ackedVersion,omitempty"`
	AckedSequence uint64    `json:"ackedSequence"`
	AckedAt       time.Time `json:"ackedAt,omitzero"`
	InFlight      string    `json:"inFlightVersion,omitempty"`
	// Deltas says the proxy takes deltas (it announced them); LastPushBytes is the size of the
	// last push sent to it, and LastPushDelta whether that push was a delta.
	Deltas        bool        `json:"deltas"`
	LastPushBytes int         `json:"lastPushBytes,omitempty"`
	LastPushDelta bool        `json:"lastPushDelta,omitempty"`
	LastRejection *Rejection  `json:"lastRejection,omitempty"`
	Bound         []BoundView `json:"boundListeners"`
	// Failed are the listeners the proxy cannot bind; it serves the rest and retries these.
	Failed         []FailedView `json:"failedListeners,omitempty"`
	MissingModules []string     `json:"missingModules,omitempty"`
}

// FailedView is one listener socket a proxy cannot bind.
type FailedView struct {
	Name    string `json:"name"`
	Address string `json:"address"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// Rejection is a snapshot a proxy rejected (and the error it gave) since its last acknowledgement.
type Rejection struct {
	Version  string    `json:"version"`
	Sequence uint64    `json:"sequence"`
	Error    string    `json:"error"`
	At       time.Time `json:"at"`
}

// BoundView is one listener socket a proxy has bound.
type BoundView struct {
	Name     string `json:"name"`
	Protocol string `json:"protocol"`
	Address  string `json:"address"`
}

// GatewayState is a Gateway's current generation at the gate.
type GatewayState struct {
	Gateway       string `json:"gateway"`
	Generation    int64  `json:"generation"`
	FirstSequence uint64 `json:"firstSequence"`
	Programmed    bool   `json:"programmed"`
	Awaiting      string `json:"awaiting,omitempty"`
	// Unbound says which of its listeners which proxies cannot bind, and why.
	Unbound string `json:"unbound,omitempty"`
}

// Fleet returns the current view; empty with Leader false on a standby.
func (s *Server) Fleet() Fleet {
	t := s.term.Load()
	if t == nil {
		return Fleet{Proxies: []ProxyView{}, Gateways: []GatewayState{}}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	f := Fleet{Leader: true, Sequence: t.seq, Proxies: []ProxyView{}, Gateways: []GatewayState{}}
	if t.latest != nil {
		f.Version, f.PublishedAt = t.latest.snap.GetVersion(), t.latest.at
	}
	for _, sess := range t.sessions {
		f.Proxies = append(f.Proxies, sess.view())
	}
	sort.Slice(f.Proxies, func(i, j int) bool { return f.Proxies[i].Node < f.Proxies[j].Node })
	for k, st := range t.gateways {
		g := GatewayState{Gateway: k.String(), Generation: st.gen.GetGeneration(), FirstSequence: st.first, Programmed: st.applied, Unbound: st.unbound}
		if !st.applied {
			g.Awaiting = st.pending
		}
		f.Gateways = append(f.Gateways, g)
	}
	sort.Slice(f.Gateways, func(i, j int) bool { return f.Gateways[i].Gateway < f.Gateways[j].Gateway })
	return f
}

// view describes the session (t.mu held).
func (s *session) view() ProxyView {
	v := ProxyView{Node: s.node, SPIFFEID: s.id.String(), Mode: "shared", Build: s.hello.GetBuild(),
		Modules: len(s.modules), ModuleIDs: slices.Sorted(maps.Keys(s.modules)), Connected: s.connected, CertUntil: s.notAfter,
		AckedVersion: s.acked.version, AckedSequence: s.acked.seq, AckedAt: s.acked.at, Bound: []BoundView{}, MissingModules: s.missing,
		Deltas: s.deltas, LastPushBytes: s.lastBytes, LastPushDelta: s.lastDelta}
	if s.gw != nil {
		v.Mode, v.Gateway = "dedicated", s.gw.String()
	}
	if s.inflight != nil {
		v.InFlight = s.inflight.version
	}
	if n := s.nack; n != nil {
		v.LastRejection = &Rejection{Version: n.version, Sequence: n.seq, Error: n.err, At: n.at}
	}
	for _, b := range s.boundList {
		v.Bound = append(v.Bound, BoundView{Name: b.GetName(), Protocol: b.GetProtocol(), Address: b.GetAddress()})
	}
	for _, f := range s.failedList {
		v.Failed = append(v.Failed, FailedView{Name: f.GetName(), Address: f.GetAddress(), Reason: f.GetReason().String(), Message: f.GetMessage()})
	}
	return v
}

// SentTo is the snapshot last sent to (or found already served by) the proxy named node, with
// every private key removed.
func (s *Server) SentTo(node string) (*irv1.Snapshot, bool) {
	t := s.term.Load()
	if t == nil {
		return nil, false
	}
	t.mu.Lock()
	var prep *prepared
	for _, sess := range t.sessions {
		if sess.node == node {
			prep = sess.last
		}
	}
	t.mu.Unlock()
	if prep == nil || prep.snap == nil {
		return nil, false
	}
	out := proto.Clone(prep.snap).(*irv1.Snapshot)
	for _, sec := range out.GetSecrets() {
		sec.PrivateKeyPem = nil
	}
	return out, true
}

// RegisterAdmin adds the fleet endpoints to mux: /api/v1/fleet, /api/v1/fleet/proxies,
// /api/v1/fleet/proxies/{name} and /api/v1/fleet/proxies/{name}/routes (the routing table the
// proxy was sent, without keys). docs/admin-api.md documents them.
func (s *Server) RegisterAdmin(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/v1/fleet", func(w http.ResponseWriter, _ *http.Request) {
		admin.WriteJSON(w, s.Fleet())
	})
	mux.HandleFunc("GET /api/v1/fleet/proxies", func(w http.ResponseWriter, _ *http.Request) {
		admin.WriteJSON(w, struct {
			Proxies []ProxyView `json:"proxies"`
		}{s.Fleet().Proxies})
	})
	mux.HandleFunc("GET /api/v1/fleet/proxies/{name}", func(w http.ResponseWriter, r *http.Request) {
		for _, p := range s.Fleet().Proxies {
			if p.Node == r.PathValue("name") {
				admin.WriteJSON(w, p)
				return
			}
		}
		admin.WriteError(w, http.StatusNotFound, "no proxy named "+r.PathValue("name")+" is connected to this controller")
	})
	mux.HandleFunc("GET /api/v1/fleet/proxies/{name}/routes", func(w http.ResponseWriter, r *http.Request) {
		snap, ok := s.SentTo(r.PathValue("name"))
		if !ok {
			admin.WriteError(w, http.StatusNotFound, "no such proxy connected to this controller (or it has been sent nothing yet)")
			return
		}
		b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(snap)
		var out bytes.Buffer
		if err == nil {
			// protojson's own layout is deliberately unstable; encoding/json's is not.
			err = json.Indent(&out, b, "", "  ")
		}
		if err != nil {
			admin.WriteError(w, http.StatusInternalServerError, err.Error())
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = out.WriteTo(w)
	})
}
