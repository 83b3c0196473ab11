// Package hash is the "lb.hash" balancer: the endpoint is chosen by rendezvous (highest random
// weight) hashing of a key taken from the request, so that equal keys go to the same endpoint and
// removing one of N endpoints moves only the keys that were on it (about 1/N of them). A request
// without the key (no such header or cookie, a client address that is not IP) is balanced by
// smooth weighted round robin instead.
//
// Keys (Config.Key):
//
//	source-ip   the downstream client's IP address (what policies call ip_hash)
//	uri         the request path and query, as routed (after any rewrite filter)
//	header      the first value of the request header Config.Name
//	cookie      the value of the request cookie Config.Name
//
// The scores (package core/proxy/hrw, shared with the engine's header session persistence) depend
// only on the key and the endpoints' addresses, never on a process seed, so every proxy of a
// fleet sends a key to the same endpoint. With unequal weights, the score of an endpoint is
// weight / -ln(u) (u its hash as a number in (0, 1)), which gives each endpoint a share of the
// keys proportional to its weight and keeps the HRW stability property.
package hash

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"net/textproto"
	"sync/atomic"

	"golang.org/x/net/http/httpguts"

	"github.com/coxswain-labs/coxswain/core"
	"github.com/coxswain-labs/coxswain/core/proxy/hrw"
	"github.com/coxswain-labs/coxswain/core/proxy/wrr"
)

// ModuleID is the ID this package registers.
const ModuleID core.ModuleID = "lb.hash"

func init() {
	core.RegisterModule(&Hash{})
}

// Keys of Config.Key.
const (
	KeySourceIP = "source-ip"
	KeyURI      = "uri"
	KeyHeader   = "header"
	KeyCookie   = "cookie"
)

// Config is the module's config.
type Config struct {
	// Key is what is hashed: source-ip, uri, header or cookie.
	Key string `json:"key"`
	// Name is the header or cookie name (key header and cookie only).
	Name string `json:"name,omitempty"`
}

// Hash is the balancer.
type Hash struct {
	Config

	kind   keyKind
	header string // canonical header name
	state  atomic.Pointer[state]
}

type keyKind uint8

const (
	bySourceIP keyKind = iota + 1
	byURI
	byHeader
	byCookie
)

type state struct {
	eps   []*core.Endpoint
	nodes hrw.Nodes // node i is eps[i]
	rr    *wrr.Schedule
}

var (
	_ core.Module        = (*Hash)(nil)
	_ core.Provisioner   = (*Hash)(nil)
	_ core.ConfigChecker = (*Hash)(nil)
	_ core.Balancer      = (*Hash)(nil)
)

// CoxswainModule implements core.Module.
func (*Hash) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: ModuleID, New: func() core.Module { return new(Hash) }}
}

// Provision implements core.Provisioner: it checks the config and compiles the key.
func (h *Hash) Provision(*core.BuildContext) error { return h.compile() }

// CheckConfig implements core.ConfigChecker, for the translator.
func (h *Hash) CheckConfig() error { return h.compile() }

func (h *Hash) compile() error {
	switch h.Key {
	case KeySourceIP:
		h.kind = bySourceIP
	case KeyURI:
		h.kind = byURI
	case KeyHeader:
		h.kind = byHeader
		h.header = textproto.CanonicalMIMEHeaderKey(h.Name)
	case KeyCookie:
		h.kind = byCookie
	default:
		return fmt.Errorf("key %q: want %s, %s, %s or %s", h.Key, KeySourceIP, KeyURI, KeyHeader, KeyCookie)
	}
	named := h.kind == byHeader || h.kind == byCookie
	switch {
	case named && h.Name == "":
		return fmt.Errorf("key %s needs a name", h.Key)
	case !named && h.Name != "":
		return fmt.Errorf("key %s takes no name", h.Key)
	case named && !httpguts.ValidHeaderFieldName(h.Name):
		// Header and cookie names are both RFC 9110 tokens; a name that is not one never
		// matches a request, so it is a mistake to report, not a key to hash on.
		return fmt.Errorf("key %s: %q is not a valid %s name", h.Key, h.Name, h.Key)
	}
	return nil
}

// ConcurrentSetEndpoints marks SetEndpoints as safe while Pick runs (the state is published
// atomically), so the engine updates the cluster's endpoints in place.
func (*Hash) ConcurrentSetEndpoints() {}

// SetEndpoints implements core.Balancer. The state is a function of the endpoints alone, so
// there is nothing to carry over from the previous set.
func (h *Hash) SetEndpoints(eps []*core.Endpoint) {
	s := &state{eps: eps, nodes: hrw.Make(len(eps))}
	weights := make([]uint32, len(eps))
	for i, ep := range eps {
		s.nodes.Add(ep.HostPort, ep.Weight)
		weights[i] = ep.Weight
	}
	s.rr = wrr.New(weights)
	if n := s.rr.Len(); n > 1 {
		s.rr.Seek(rand.Uint64N(n))
	}
	h.state.Store(s)
}

// Pick implements core.Balancer.
func (h *Hash) Pick(info *core.PickInfo) *core.Endpoint {
	s := h.state.Load()
	if s == nil || len(s.eps) == 0 {
		return nil
	}
	if len(s.eps) == 1 {
		return s.eps[0]
	}
	key, ok := h.key(info)
	if !ok {
		if i := s.rr.Next(); i >= 0 {
			return s.eps[i]
		}
		return nil
	}
	return s.eps[s.nodes.Pick(key)]
}

// key hashes the request's key; ok is false when it has none.
func (h *Hash) key(info *core.PickInfo) (uint64, bool) {
	r := info.Request
	switch h.kind {
	case bySourceIP:
		return sourceIP(info.Client)
	case byURI:
		if r == nil {
			return 0, false
		}
		k := hrw.Key(r.URL.Path)
		if r.URL.RawQuery != "" {
			k = hrw.String(hrw.Byte(k, '?'), r.URL.RawQuery)
		}
		return k, true
	case byHeader:
		if r == nil {
			return 0, false
		}
		if v := r.Header[h.header]; len(v) > 0 && v[0] != "" {
			return hrw.Key(v[0]), true
		}
	case byCookie:
		if r == nil {
			return 0, false
		}
		if v, ok := cookie(r.Header, h.Name); ok {
			return hrw.Key(v), true
		}
	}
	return 0, false
}

// sourceIP hashes the 16-byte form of the client's IP, so that an IPv4 address hashes the same
// whichever form the socket reported.
func sourceIP(a netip.AddrPort) (uint64, bool) {
	if !a.Addr().IsValid() {
		return 0, false
	}
	ip := a.Addr().As16()
	k := hrw.Offset
	for _, b := range ip {
		k = hrw.Byte(k, b)
	}
	return k, true
}

// cookie finds the value of the cookie name in the Cookie header lines without allocating
// (http.Request.Cookie parses them all into a slice). A quoted value is unquoted; an empty one
// counts as missing.
func cookie(h http.Header, name string) (string, bool) {
	for _, line := range h["Cookie"] {
		for len(line) > 0 {
			var part string
			if i := indexByte(line, ';'); i >= 0 {
				part, line = line[:i], line[i+1:]
			} else {
				part, line = line, ""
			}
			part = trimSpace(part)
			if len(part) <= len(name) || part[:len(name)] != name || part[len(name)] != '=' {
				continue
			}
			v := part[len(name)+1:]
			if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
				v = v[1 : len(v)-1]
			}
			if v != "" {
				return v, true
			}
		}
	}
	return "", false
}

func indexByte(s string, c byte) int {
	for i := range len(s) {
		if s[i] == c {
			return i
		}
	}
	return -1
}

func trimSpace(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}
