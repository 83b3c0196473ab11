// Package ratelimit is the RateLimit filter, "filter.ext.gateway.coxswain-labs.dev.RateLimit": a
// token bucket per key (the client's address, or a request header's value), on HTTPRoute and
// GRPCRoute rules. A request over the limit is answered 429 with Retry-After and X-RateLimit-*
// headers (a gRPC call: RESOURCE_EXHAUSTED), and never reaches the upstream.
//
// The buckets are golang.org/x/time/rate limiters kept in core.Shared state under the object's
// zone and a hash of its spec, so that a new snapshot leaves them alone unless the object
// changed; every rule that references one object shares them. Local mode keeps them in the proxy
// (bounded: see bucketStore); Global mode keeps them in Redis, one atomic script call per
// request (see bucketScript).
package ratelimit

import (
	"crypto/sha256"
	"fmt"
	"math"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"golang.org/x/time/rate"

	"github.com/coxswain-labs/coxswain/core"
)

func init() {
	core.RegisterModule((*RateLimit)(nil))
}

var (
	_ core.ExtensionKind     = (*RateLimit)(nil)
	_ core.HTTPRequestFilter = (*RateLimit)(nil)
	_ core.Provisioner       = (*RateLimit)(nil)
	_ core.Validator         = (*RateLimit)(nil)
	_ core.ConfigChecker     = (*RateLimit)(nil)
	_ core.ConfigWarner      = (*RateLimit)(nil)
)

// API is the resource behind this module's ExtensionRefs. A reference to a RateLimit that does
// not exist fails open, as Coxswain's filter kinds do: the rule is served unlimited and the route
// says why (ResolvedRefs=False, FilterNotFound).
var API = core.ExtensionAPI{
	Group:    "gateway.coxswain-labs.dev",
	Kind:     "RateLimit",
	Version:  "v1alpha1",
	Resource: "ratelimits",
	FailOpen: true,
}

// Response header names (in canonical form, as the header map keys them).
const (
	HeaderLimit      = "X-Ratelimit-Limit"
	HeaderRemaining  = "X-Ratelimit-Remaining"
	HeaderReset      = "X-Ratelimit-Reset"
	HeaderRetryAfter = "Retry-After"
)

// countValues are the header values of the small numbers, shared by every response (header
// values are replaced, never written in place, by what follows in the chain).
var countValues = func() [][]string {
	out := make([][]string, 1025)
	for i := range out {
		out[i] = []string{strconv.Itoa(i)}
	}
	return out
}()

func countValue(n int) []string {
	if n >= 0 && n < len(countValues) {
		return countValues[n]
	}
	return []string{strconv.Itoa(n)}
}

// RateLimit is the module.
type RateLimit struct {
	Config

	spec   Spec // Config.Spec with the defaults
	limit  rate.Limit
	header string // canonical key header

	ips     *bucketStore[netip.Addr]
	strs    *bucketStore[string]
	redis   *redisConn // Global mode; nil when no address is configured
	prefix  string     // Global mode's Redis key prefix
	limitHV []string   // X-RateLimit-Limit's value

	rejected    prometheus.Counter
	redisErrors prometheus.Counter
}

// CoxswainModule implements core.Module.
func (*RateLimit) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: ModuleID, New: func() core.Module { return new(RateLimit) }}
}

// ExtensionAPI implements core.ExtensionKind.
func (*RateLimit) ExtensionAPI() core.ExtensionAPI { return API }

// ExtensionRouteKinds implements core.ExtensionRouteKinds.
func (*RateLimit) ExtensionRouteKinds() (supported, ignored []string) {
	return []string{"HTTPRoute", "Ingress", "GRPCRoute"}, nil
}

// CheckConfig implements core.ConfigChecker.
func (f *RateLimit) CheckConfig() error { return f.check() }

// Validate implements core.Validator.
func (f *RateLimit) Validate() error { return f.check() }

// ConfigWarnings implements core.ConfigWarner.
func (f *RateLimit) ConfigWarnings() []string {
	if f.FailureMode != "" && f.Mode != ModeGlobal {
		return []string{fmt.Sprintf("failureMode %s has no effect on a Local limit", f.FailureMode)}
	}
	return nil
}

// stateKey names the limit's shared state: the same object with the same spec is the same
// limit across snapshots.
func (f *RateLimit) stateKey() string {
	return ModuleID + "|" + f.Zone + "|" + f.hash()
}

// Provision makes or finds the limit's buckets.
func (f *RateLimit) Provision(bc *core.BuildContext) error {
	if err := f.check(); err != nil {
		return err
	}
	f.spec = f.withDefaults()
	f.limit = rate.Limit(float64(f.spec.Requests) / f.spec.period().Seconds())
	f.header = f.spec.canonicalHeader()
	f.limitHV = []string{strconv.Itoa(int(f.spec.Burst))}
	for _, w := range f.ConfigWarnings() {
		bc.Log.Warn(w, zap.String("zone", f.Zone))
	}
	if err := f.provisionMetrics(bc.Metrics); err != nil {
		return err
	}
	if f.spec.Mode == ModeGlobal {
		return f.provisionGlobal(bc)
	}
	maxKeys := DefaultMaxKeys
	if v, ok := bc.Settings[SettingMaxKeys]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < numShards {
			return fmt.Errorf("setting %s=%q: want a whole number of at least %d", SettingMaxKeys, v, numShards)
		}
		maxKeys = n
	}
	key := f.stateKey() + "|local|" + strconv.Itoa(maxKeys)
	burst := int(f.spec.Burst)
	var err error
	if f.spec.Key.Type == KeyHeader {
		f.strs, err = core.Shared(bc, key, func() (*bucketStore[string], error) {
			return newBucketStore(f.limit, burst, maxKeys, hashString, strings.Clone), nil
		})
	} else {
		f.ips, err = core.Shared(bc, key, func() (*bucketStore[netip.Addr], error) {
			return newBucketStore(f.limit, burst, maxKeys, hashAddr, sameAddr), nil
		})
	}
	return err
}

func (f *RateLimit) provisionMetrics(m *core.Metrics) error {
	rej, err := m.CounterVec("coxswain_ratelimit_rejected_total",
		"Requests a RateLimit answered with 429 (gRPC RESOURCE_EXHAUSTED), by RateLimit object.", "ratelimit")
	if err != nil {
		return err
	}
	rerr, err := m.CounterVec("coxswain_ratelimit_redis_errors_total",
		"Requests of Global RateLimits decided by failureMode because Redis did not answer in time (or was in its backoff after a failure).", "ratelimit")
	if err != nil {
		return err
	}
	f.rejected, f.redisErrors = rej.WithLabelValues(f.Zone), rerr.WithLabelValues(f.Zone)
	return nil
}

func (f *RateLimit) provisionGlobal(bc *core.BuildContext) error {
	// The key prefix is the same on every replica: zone and spec, nothing of the proxy.
	f.prefix = "coxswain:ratelimit:" + f.Zone + ":" + f.hash() + ":"
	addr := bc.Settings[SettingRedisAddress]
	if addr == "" {
		// Not a reason to reject the snapshot (every other route would stop updating): the limit
		// behaves as with Redis unreachable, and says so.
		bc.Log.Error("a Global RateLimit needs the proxy flag --module-setting "+SettingRedisAddress+"=HOST:PORT; its requests follow failureMode",
			zap.String("zone", f.Zone), zap.String("failureMode", string(f.spec.FailureMode)))
		return nil
	}
	timeout := DefaultRedisTimeout
	if v, ok := bc.Settings[SettingRedisTimeout]; ok {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return fmt.Errorf("setting %s=%q: want a positive duration", SettingRedisTimeout, v)
		}
		timeout = d
	}
	log := bc.Log
	conn, err := core.Shared(bc, ModuleID+"|redis|"+addr+"|"+timeout.String(), func() (*redisConn, error) {
		return newRedisConn(addr, timeout, log)
	})
	f.redis = conn
	return err
}

// FilterRequest admits the request or answers it. A request without a key (no client address,
// no key header) is admitted and not counted.
func (f *RateLimit) FilterRequest(w http.ResponseWriter, r *http.Request) bool {
	var d decision
	switch {
	case f.spec.Mode == ModeGlobal:
		key, ok := f.redisKey(r)
		if !ok {
			return true
		}
		var answered bool
		if d, answered = f.redis.take(r.Context(), key, f.limit, int(f.spec.Burst)); !answered {
			return f.unavailable(w, r)
		}
	case f.strs != nil:
		vals := r.Header[f.header]
		if len(vals) == 0 || vals[0] == "" {
			return true
		}
		d = f.strs.take(headerKey(vals[0]), time.Now())
	default:
		ip := core.ClientIP(r)
		if !ip.IsValid() {
			return true
		}
		d = f.ips.take(ip, time.Now())
	}
	h := w.Header()
	h[HeaderLimit] = f.limitHV
	h[HeaderRemaining] = countValue(d.remaining)
	if d.allowed {
		return true
	}
	h[HeaderReset] = countValue(ceilSeconds(d.reset))
	h[HeaderRetryAfter] = countValue(max(1, ceilSeconds(d.retryAfter)))
	f.rejected.Inc()
	core.Deny(w, r, http.StatusTooManyRequests, core.GRPCResourceExhausted, "rate limit exceeded")
	return false
}

// unavailable applies failureMode to a request Redis could not decide.
func (f *RateLimit) unavailable(w http.ResponseWriter, r *http.Request) bool {
	f.redisErrors.Inc()
	if f.spec.FailureMode == FailClosed {
		core.Deny(w, r, http.StatusServiceUnavailable, core.GRPCUnavailable, "rate limit store unavailable")
		return false
	}
	return true
}

// redisKey is the request's bucket in Redis; ok is false when the request has no key.
func (f *RateLimit) redisKey(r *http.Request) (string, bool) {
	if f.spec.Key.Type == KeyHeader {
		vals := r.Header[f.header]
		if len(vals) == 0 || vals[0] == "" {
			return "", false
		}
		return f.prefix + "h:" + headerKey(vals[0]), true
	}
	ip := core.ClientIP(r)
	if !ip.IsValid() {
		return "", false
	}
	return string(ip.AppendTo([]byte(f.prefix + "ip:"))), true
}

// headerKey is a header value as a bucket key: as it is up to maxKeyLen bytes, else its SHA-256
// after a NUL byte (which no header value holds, so the two forms cannot meet).
func headerKey(v string) string {
	if len(v) <= maxKeyLen {
		return v
	}
	sum := sha256.Sum256([]byte(v))
	return "\x00" + string(sum[:])
}

// ceilSeconds is d in whole seconds, rounded up.
func ceilSeconds(d time.Duration) int {
	if d <= 0 {
		return 0
	}
	return int(math.Ceil(d.Seconds()))
}
