package proxy

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"hash"
	"net/http"
	"net/textproto"
	"strings"
	"sync/atomic"

	"golang.org/x/net/http/httpguts"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy/hrw"
)

// sticky is a cluster's session persistence (irv1.SessionPersistence). There is no table of
// sessions: the pin is recomputed from every request (the cookie's token, or the header's hash),
// so every proxy given the same snapshot agrees, and a restart or a new table forgets nothing.
//
//   - COOKIE: an endpoint's token is base64url(HMAC-SHA256(key, HostPort)[:16]), which neither
//     shows the endpoint's address nor can be made for one without the key. A request whose
//     cookie carries the token of a current endpoint goes there; any other token (forged, or of an
//     endpoint that left) selects nothing, the balancer picks, and the response sets the new
//     endpoint's cookie.
//   - HEADER: the header's first value is hashed onto the endpoints by rendezvous hashing
//     (core/proxy/hrw, exactly as lb.hash does), so a value stays on its endpoint while it
//     exists and removing one of N endpoints moves only its values. No header, no pin.
//
// Everything computed from the endpoints (tokens, whole Set-Cookie values, HRW seeds) is one
// immutable stickyPins, replaced whenever the cluster's endpoints change (builder.cluster,
// fastApply) and read with one atomic load: a request that carries a valid cookie, or any request
// in header mode, costs no lock and no allocation.
type sticky struct {
	header bool   // HEADER, else COOKIE
	name   string // the cookie name, or the header's canonical name
	key    []byte // COOKIE: the tokens' HMAC key
	pins   atomic.Pointer[stickyPins]
}

// stickyPins is what a sticky computed from one endpoint set.
type stickyPins struct {
	// COOKIE
	byToken map[string]*stickyPin
	byEp    map[*core.Endpoint]*stickyPin
	// HEADER: node i of nodes is eps[i].
	eps   []*core.Endpoint
	nodes hrw.Nodes
}

// stickyPin is one endpoint's cookie.
type stickyPin struct {
	ep        *core.Endpoint
	token     string
	setCookie string // the whole Set-Cookie value: "<name>=<token>; Path=/; HttpOnly"
}

// tokenBytes is how much of the HMAC a token keeps: 128 bits, which nobody guesses.
const tokenBytes = 16

// newSticky compiles the session persistence of the cluster called cluster.
func newSticky(cluster string, sp *irv1.SessionPersistence) (*sticky, error) {
	name := sp.GetName()
	if !httpguts.ValidHeaderFieldName(name) { // a cookie name is the same token (RFC 6265 §4.1.1)
		return nil, fmt.Errorf("name %q is not a valid header or cookie name", name)
	}
	switch sp.GetType() {
	case irv1.SessionPersistence_HEADER:
		return &sticky{header: true, name: textproto.CanonicalMIMEHeaderKey(name)}, nil
	case irv1.SessionPersistence_COOKIE:
	default:
		return nil, fmt.Errorf("unknown type %v", sp.GetType())
	}
	key := sp.GetKey()
	if len(key) == 0 {
		// The controller always sends a key (a per-cluster secret). Without one (tests, a
		// hand-written snapshot) it is derived from the cluster's name, so that the cookies still
		// work and every proxy still agrees; but such a key is no secret: whoever knows the
		// cluster's name can compute the token of any address and so tell which pod a token
		// names (tokens still select only the cluster's current endpoints).
		sum := sha256.Sum256([]byte("coxswain session persistence key\x00" + cluster))
		key = sum[:]
	}
	return &sticky{name: name, key: key}, nil
}

// setEndpoints publishes the pins of eps. The tokens of endpoints that were in the previous set
// (the same *core.Endpoint: endpointsOf keeps unchanged ones) are reused, so an update computes
// the HMAC of the new endpoints only. Safe while pinned and pin run.
func (s *sticky) setEndpoints(eps []*core.Endpoint) {
	p := &stickyPins{}
	if s.header {
		p.eps, p.nodes = eps, hrw.Make(len(eps))
		for _, ep := range eps {
			p.nodes.Add(ep.HostPort, ep.Weight)
		}
		s.pins.Store(p)
		return
	}
	prev := s.pins.Load()
	p.byToken = make(map[string]*stickyPin, len(eps))
	p.byEp = make(map[*core.Endpoint]*stickyPin, len(eps))
	var mac hash.Hash
	for _, ep := range eps {
		var pin *stickyPin
		if prev != nil {
			pin = prev.byEp[ep]
		}
		if pin == nil {
			if mac == nil {
				mac = hmac.New(sha256.New, s.key)
			}
			tok := token(mac, ep.HostPort)
			pin = &stickyPin{ep: ep, token: tok, setCookie: s.name + "=" + tok + "; Path=/; HttpOnly"}
		}
		p.byToken[pin.token] = pin
		p.byEp[ep] = pin
	}
	s.pins.Store(p)
}

// token is the cookie token of the endpoint at hostPort: mac is HMAC-SHA256 under the key.
func token(mac hash.Hash, hostPort string) string {
	mac.Reset()
	_, _ = mac.Write([]byte(hostPort))
	var sum [sha256.Size]byte
	return base64.RawURLEncoding.EncodeToString(mac.Sum(sum[:0])[:tokenBytes])
}

// pinned returns the current endpoint r's session is pinned to, nil when none: COOKIE, the
// endpoint whose token one of r's cookies called s.name carries; HEADER, the endpoint the first
// value of the header hashes to.
func (s *sticky) pinned(r *http.Request) *core.Endpoint {
	p := s.pins.Load()
	if s.header {
		v := r.Header[s.name]
		if len(v) == 0 || v[0] == "" {
			return nil
		}
		if i := p.nodes.Pick(hrw.Key(v[0])); i >= 0 {
			return p.eps[i]
		}
		return nil
	}
	c := cookies{lines: r.Header["Cookie"], name: s.name}
	for v, ok := c.next(); ok; v, ok = c.next() {
		if pin := p.byToken[v]; pin != nil {
			return pin.ep
		}
	}
	return nil
}

// pin makes ep the session's endpoint for the client's next requests. COOKIE: unless r already
// carried ep's token, the response sets ep's cookie (appended to w's header, which the forwarders
// keep). An endpoint the pins do not know (the balancer picked from an endpoint set that an
// update is replacing) gets no cookie: the next request is balanced again. HEADER: nothing, the
// header is the pin.
func (s *sticky) pin(w http.ResponseWriter, r *http.Request, ep *core.Endpoint) {
	if s.header {
		return
	}
	pin := s.pins.Load().byEp[ep]
	if pin == nil {
		return
	}
	c := cookies{lines: r.Header["Cookie"], name: s.name}
	for v, ok := c.next(); ok; v, ok = c.next() {
		if v == pin.token {
			return
		}
	}
	h := w.Header()
	h["Set-Cookie"] = append(h["Set-Cookie"], pin.setCookie)
}

// cookies iterates over the values of the cookies called name in the Cookie header lines, in
// place (http.Request.Cookies parses them all into a slice). A browser sends one cookie name more
// than once when cookies of several paths or domains match. A quoted value is unquoted; empty
// values are skipped.
type cookies struct {
	lines []string
	line  string
	name  string
}

func (c *cookies) next() (string, bool) {
	for {
		for len(c.line) > 0 {
			var part string
			if i := strings.IndexByte(c.line, ';'); i >= 0 {
				part, c.line = c.line[:i], c.line[i+1:]
			} else {
				part, c.line = c.line, ""
			}
			part = trimOWS(part)
			n := len(c.name)
			if len(part) <= n || part[n] != '=' || part[:n] != c.name {
				continue
			}
			v := part[n+1:]
			if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
				v = v[1 : len(v)-1]
			}
			if v != "" {
				return v, true
			}
		}
		if len(c.lines) == 0 {
			return "", false
		}
		c.line, c.lines = c.lines[0], c.lines[1:]
	}
}

// trimOWS trims spaces and tabs (strings.Trim takes a cutset, which costs more per call).
func trimOWS(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}
