package translator

import (
	"fmt"
	"math"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"
	"google.golang.org/protobuf/proto"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	policyv1a1 "github.com/coxswain-labs/coxswain/modules/api/policy/v1alpha1"
)

// DefaultSessionCookie is the cookie of Cookie session persistence without a sessionName.
const DefaultSessionCookie = "__coxswain_session"

// The circuit breaker's defaults (CoxswainBackendPolicy spec.circuitBreaker).
const (
	DefaultBreakerWindow      = 10 * time.Second
	DefaultBreakerOpen        = 5 * time.Second
	DefaultBreakerMinRequests = 10
)

// The balancer modules the policy's algorithms map onto (docs/load-balancing.md); round_robin is
// the proxy's default (core.DefaultBalancer), left unset. They are named, not imported: a module package registers itself, and the translator must not compile a
// balancer into a distribution that left it out.
const (
	lbLeastConn core.ModuleID = "lb.least_conn"
	lbEWMA      core.ModuleID = "lb.ewma"
	lbHash      core.ModuleID = "lb.hash"
)

// hashConfig is lb.hash's config (modules/lb/hash.Config), checked against the module itself.
type hashConfig struct {
	Key  string `json:"key"`
	Name string `json:"name,omitempty"`
}

// clusterSettings are what a CoxswainBackendPolicy sets on the clusters of its Services. Zero
// values keep the proxy's defaults.
type clusterSettings struct {
	connectMS, idleMS uint32
	balancer          *irv1.ModuleConfig // nil: lb.round_robin
	breaker           *irv1.CircuitBreaker
	persistence       *irv1.SessionPersistence // without its key, which is per cluster
}

// ignored is a policy field that cannot be used as written, and why (naming the default that
// applies instead): a warning in status, never a rejection.
type ignored struct {
	field string
	why   string
}

// settingsOf reads a policy's spec, failing open: every value it cannot use is ignored (and
// listed) and its default applies.
func (t *session) settingsOf(spec *policyv1a1.CoxswainBackendPolicySpec) (clusterSettings, []ignored) {
	var s clusterSettings
	var ign []ignored
	note := func(field, format string, args ...any) {
		ign = append(ign, ignored{field: field, why: fmt.Sprintf(format, args...)})
	}
	if to := spec.Timeouts; to != nil {
		s.connectMS = durationMS(to.Connect, "spec.timeouts.connect", "the proxy's connect timeout applies", 0, note)
		s.idleMS = durationMS(to.Idle, "spec.timeouts.idle", "the proxy's idle timeout applies", 0, note)
	}
	if lb := spec.LoadBalancer; lb != nil && lb.Algorithm != "" {
		var why string
		if s.balancer, why = t.balancer(lb.Algorithm); why != "" {
			note("spec.loadBalancer.algorithm", "%s; round_robin is used", why)
		}
	}
	s.breaker = breaker(spec.CircuitBreaker, note)
	s.persistence = persistence(spec.SessionPersistence, note)
	return s, ign
}

// durationMS parses a policy duration into milliseconds; "" gives def (in ms) silently, and a
// value it cannot use gives def with a note saying what applies instead.
func durationMS(s, field, instead string, def uint32, note func(field, format string, args ...any)) uint32 {
	if s == "" {
		return def
	}
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		note(field, "%q is not a duration (write it as 500ms, 10s or 1m30s); %s", s, instead)
	case d < time.Millisecond:
		note(field, "%q is less than 1ms; %s", s, instead)
	case d.Milliseconds() > math.MaxUint32:
		note(field, "%q is longer than %s; %s", s, time.Duration(math.MaxUint32)*time.Millisecond, instead)
	default:
		return uint32(d.Milliseconds())
	}
	return def
}

// balancer maps an algorithm onto its lb.* module and config, checked with the module's own
// strict decode and CheckConfig; why says why it cannot be used.
func (t *session) balancer(alg string) (mc *irv1.ModuleConfig, why string) {
	var id core.ModuleID
	var cfg any
	switch {
	case alg == "round_robin":
		return nil, ""
	case alg == "least_conn":
		id = lbLeastConn
	case alg == "ewma":
		id = lbEWMA
	case alg == "ip_hash" || alg == "hash:source-ip":
		id, cfg = lbHash, hashConfig{Key: "source-ip"}
	case alg == "hash:uri":
		id, cfg = lbHash, hashConfig{Key: "uri"}
	case strings.HasPrefix(alg, "hash:header="):
		id, cfg = lbHash, hashConfig{Key: "header", Name: strings.TrimPrefix(alg, "hash:header=")}
	case strings.HasPrefix(alg, "hash:cookie="):
		id, cfg = lbHash, hashConfig{Key: "cookie", Name: strings.TrimPrefix(alg, "hash:cookie=")}
	default:
		return nil, fmt.Sprintf("unknown algorithm %q (want round_robin, least_conn, ewma, ip_hash, hash:source-ip, hash:uri, hash:header=<name> or hash:cookie=<name>)", alg)
	}
	mc = core.MustConfig(id, cfg)
	info, ok := t.opts.Registry.Lookup(id)
	if !ok {
		return nil, fmt.Sprintf("%q needs module %s, which is not compiled into this build", alg, id)
	}
	mod := info.New()
	if err := core.DecodeStrict(mc.GetJson(), mod); err != nil {
		return nil, fmt.Sprintf("%q: %v", alg, err)
	}
	if c, ok := mod.(core.ConfigChecker); ok {
		if err := c.CheckConfig(); err != nil {
			return nil, fmt.Sprintf("%q: %v", alg, err)
		}
	}
	return mc, ""
}

// breaker reads spec.circuitBreaker; threshold is its on/off switch.
func breaker(cb *policyv1a1.BackendCircuitBreaker, note func(field, format string, args ...any)) *irv1.CircuitBreaker {
	if cb == nil {
		return nil
	}
	const f = "spec.circuitBreaker."
	switch {
	case cb.Threshold == nil:
		note(f+"threshold", "is not set (a percentage from 1 to 100 turns the breaker on); there is no circuit breaker")
		return nil
	case *cb.Threshold < 1 || *cb.Threshold > 100:
		note(f+"threshold", "%d is not a percentage from 1 to 100; there is no circuit breaker", *cb.Threshold)
		return nil
	}
	out := &irv1.CircuitBreaker{
		ThresholdPercent: uint32(*cb.Threshold),
		WindowMs:         durationMS(cb.Window, f+"window", "10s is used", ms(DefaultBreakerWindow), note),
		OpenMs:           durationMS(cb.OpenDuration, f+"openDuration", "5s is used", ms(DefaultBreakerOpen), note),
		MinRequests:      DefaultBreakerMinRequests,
	}
	if n := cb.MinRequests; n != nil {
		if *n < 1 {
			note(f+"minRequests", "%d is less than 1; %d is used", *n, DefaultBreakerMinRequests)
		} else {
			out.MinRequests = uint32(*n)
		}
	}
	maxOpen := durationMS(cb.MaxOpenDuration, f+"maxOpenDuration", "the open duration stays constant", 0, note)
	if maxOpen != 0 && maxOpen < out.OpenMs {
		note(f+"maxOpenDuration", "%q is shorter than the open duration (%s); the open duration stays constant",
			cb.MaxOpenDuration, time.Duration(out.OpenMs)*time.Millisecond)
		maxOpen = 0
	}
	out.MaxOpenMs = maxOpen
	return out
}

func ms(d time.Duration) uint32 { return uint32(d.Milliseconds()) }

// persistence reads spec.sessionPersistence. Cookie and header names are both RFC 9110 tokens.
func persistence(sp *policyv1a1.BackendSessionPersistence, note func(field, format string, args ...any)) *irv1.SessionPersistence {
	if sp == nil {
		return nil
	}
	const f = "spec.sessionPersistence."
	switch sp.Type {
	case "", "Cookie":
		name := sp.SessionName
		if name == "" {
			name = DefaultSessionCookie
		} else if !httpguts.ValidHeaderFieldName(name) {
			note(f+"sessionName", "%q is not a valid cookie name; %s is used", name, DefaultSessionCookie)
			name = DefaultSessionCookie
		}
		return &irv1.SessionPersistence{Type: irv1.SessionPersistence_COOKIE, Name: name}
	case "Header":
		switch name := sp.SessionName; {
		case name == "":
			note(f+"sessionName", "is required with type Header (the header to hash); there is no session persistence")
		case !httpguts.ValidHeaderFieldName(name):
			note(f+"sessionName", "%q is not a valid header name; there is no session persistence", name)
		default:
			return &irv1.SessionPersistence{Type: irv1.SessionPersistence_HEADER, Name: name}
		}
	default:
		note(f+"type", "unknown type %q (want Cookie or Header); there is no session persistence", sp.Type)
	}
	return nil
}

// apply sets s on cluster c. Layer-4 clusters (TCPRoute, TLSRoute, UDPRoute) take the connect
// timeout and the balancer only: idle pools, circuit breakers (which judge HTTP answers) and
// session persistence (cookies, headers) are HTTP things. key is the cluster's session key.
func (s *clusterSettings) apply(c *irv1.Cluster, key func() []byte) {
	c.ConnectTimeoutMs = s.connectMS
	if s.balancer != nil {
		c.Balancer = proto.Clone(s.balancer).(*irv1.ModuleConfig)
	}
	if c.GetProtocol() == irv1.Cluster_TCP || c.GetProtocol() == irv1.Cluster_UDP {
		return
	}
	c.IdleTimeoutMs = s.idleMS
	if s.breaker != nil {
		c.CircuitBreaker = proto.Clone(s.breaker).(*irv1.CircuitBreaker)
	}
	if s.persistence != nil {
		c.SessionPersistence = proto.Clone(s.persistence).(*irv1.SessionPersistence)
		if c.SessionPersistence.GetType() == irv1.SessionPersistence_COOKIE {
			c.SessionPersistence.Key = key()
		}
	}
}
