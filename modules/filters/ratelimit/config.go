package ratelimit

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/textproto"
	"strings"
	"time"
)

// ModuleID is the filter this package registers: the ExtensionRef filter for
// gateway.coxswain-labs.dev RateLimit objects.
const ModuleID = "filter.ext.gateway.coxswain-labs.dev.RateLimit"

// Unit is the period Requests are counted over.
// +kubebuilder:validation:Enum=Second;Minute;Hour
type Unit string

// Units.
const (
	UnitSecond Unit = "Second"
	UnitMinute Unit = "Minute"
	UnitHour   Unit = "Hour"
)

// KeyType says what a request is counted against.
// +kubebuilder:validation:Enum=ClientIP;Header
type KeyType string

// Key types.
const (
	// KeyClientIP counts per client address as the data plane sees it (core.ClientIP: the peer,
	// or the PROXY protocol's source).
	KeyClientIP KeyType = "ClientIP"
	// KeyHeader counts per value of a request header (an API key, a tenant ID).
	KeyHeader KeyType = "Header"
)

// Mode says where the buckets are kept.
// +kubebuilder:validation:Enum=Local;Global
type Mode string

// Modes.
const (
	// ModeLocal keeps the buckets in each proxy replica: N replicas admit up to N times the limit.
	ModeLocal Mode = "Local"
	// ModeGlobal keeps them in the Redis server the proxies are configured with
	// (--module-setting ratelimit.redis.address=HOST:PORT): one limit for the whole fleet.
	ModeGlobal Mode = "Global"
)

// FailureMode is what a Global limit does when Redis cannot answer.
// +kubebuilder:validation:Enum=Open;Closed
type FailureMode string

// Failure modes.
const (
	// FailOpen admits the request (a WARN, and coxswain_ratelimit_redis_errors_total grows).
	FailOpen FailureMode = "Open"
	// FailClosed answers 503 (gRPC UNAVAILABLE).
	FailClosed FailureMode = "Closed"
)

// Key is what a request is counted against.
//
// +kubebuilder:validation:XValidation:rule="(has(self.type) && self.type == 'Header') == has(self.header)",message="header is required when type is Header, and only then"
type Key struct {
	// Type is ClientIP (the default) or Header.
	// +optional
	Type KeyType `json:"type,omitempty"`
	// Header is the request header whose value is the key, with type Header. A request without
	// it (or with it empty) is admitted and not counted.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9!#$%&'*+.^_|~-]+$`
	// +optional
	Header string `json:"header,omitempty"`
}

// Spec is the spec of a RateLimit object: what a user writes. The CRD's spec type in
// modules/api/v1alpha1 is this type, so the kubebuilder markers below are the CRD's validation.
type Spec struct {
	// Requests is how many requests a key may make per Unit, on average.
	// +kubebuilder:validation:Minimum=1
	// +required
	Requests int32 `json:"requests"`
	// Unit is Second (the default), Minute or Hour.
	// +optional
	Unit Unit `json:"unit,omitempty"`
	// Burst is how many tokens a key's bucket holds: the most requests it may make at once
	// after being idle. The default is Requests.
	// +kubebuilder:validation:Minimum=1
	// +optional
	Burst int32 `json:"burst,omitempty"`
	// Key is what requests are counted against; the default is {type: ClientIP}.
	// +optional
	Key Key `json:"key,omitzero"`
	// Mode is Local (the default: each proxy replica has its own buckets) or Global (one bucket
	// per key for every replica, in Redis).
	// +optional
	Mode Mode `json:"mode,omitempty"`
	// FailureMode is what a Global limit does when Redis is unreachable: Open (the default)
	// admits, Closed answers 503. It has no effect on a Local limit.
	// +optional
	FailureMode FailureMode `json:"failureMode,omitempty"`
}

// Config is the module's config: the object's spec and the zone the controller adds.
type Config struct {
	Spec `json:",inline"`
	// Zone names the limit: "<namespace>/<name>" of the RateLimit object, set by the controller's
	// resolver (translate.filter.ext.gateway.coxswain-labs.dev.RateLimit) and not part of the
	// CRD; the resolver rejects a spec that sets it. Every rule referencing one object shares its
	// buckets, and a new snapshot that leaves the object alone keeps them.
	Zone string `json:"zone,omitempty"`
}

// withDefaults is s with every omitted field at its default.
func (s Spec) withDefaults() Spec {
	if s.Unit == "" {
		s.Unit = UnitSecond
	}
	if s.Burst == 0 {
		s.Burst = s.Requests
	}
	if s.Key.Type == "" {
		s.Key.Type = KeyClientIP
	}
	if s.Mode == "" {
		s.Mode = ModeLocal
	}
	if s.Mode == ModeGlobal && s.FailureMode == "" {
		s.FailureMode = FailOpen
	}
	return s
}

// check reports what the CRD's validation would reject.
func (s Spec) check() error {
	var errs []error
	if s.Requests <= 0 {
		errs = append(errs, fmt.Errorf("requests must be greater than 0, got %d", s.Requests))
	}
	switch s.Unit {
	case "", UnitSecond, UnitMinute, UnitHour:
	default:
		errs = append(errs, fmt.Errorf("unit %q: want Second, Minute or Hour", s.Unit))
	}
	if s.Burst < 0 {
		errs = append(errs, fmt.Errorf("burst must be greater than 0, got %d", s.Burst))
	}
	switch s.Key.Type {
	case "", KeyClientIP:
		if s.Key.Header != "" {
			errs = append(errs, fmt.Errorf("key.header is only for key type Header"))
		}
	case KeyHeader:
		if s.Key.Header == "" {
			errs = append(errs, errors.New("key.header is required when key.type is Header"))
		} else if !validHeaderName(s.Key.Header) {
			errs = append(errs, fmt.Errorf("key.header %q is not a valid header name", s.Key.Header))
		}
	default:
		errs = append(errs, fmt.Errorf("key.type %q: want ClientIP or Header", s.Key.Type))
	}
	switch s.Mode {
	case "", ModeLocal, ModeGlobal:
	default:
		errs = append(errs, fmt.Errorf("mode %q: want Local or Global", s.Mode))
	}
	switch s.FailureMode {
	case "", FailOpen, FailClosed:
	default:
		errs = append(errs, fmt.Errorf("failureMode %q: want Open or Closed", s.FailureMode))
	}
	return errors.Join(errs...)
}

func validHeaderName(s string) bool {
	if s == "" || len(s) > 256 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+.^_|~-", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// period is the length of Unit.
func (s Spec) period() time.Duration {
	switch s.Unit {
	case UnitMinute:
		return time.Minute
	case UnitHour:
		return time.Hour
	default:
		return time.Second
	}
}

// canonicalHeader is the header map key of Key.Header.
func (s Spec) canonicalHeader() string { return textproto.CanonicalMIMEHeaderKey(s.Key.Header) }

// hash identifies the limit a spec describes, defaults applied, so that "burst omitted" and
// "burst = requests" are one limit: the same zone with the same hash keeps its buckets.
func (s Spec) hash() string {
	b, _ := json.Marshal(s.withDefaults()) // a struct of strings and ints: cannot fail
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}
