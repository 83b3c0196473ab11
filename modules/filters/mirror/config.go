package mirror

import "time"

// ModuleID is the filter this package registers.
const ModuleID = "filter.http.request_mirror"

// MaxBody is the largest request body a mirror copies. A request whose body is at most MaxBody
// is mirrored with its whole body; a larger one (declared, or found longer while the primary
// reads it) is not mirrored at all, and counted with result "body_too_large": a truncated body
// would be a different, malformed request, which a shadow service should never see.
const MaxBody = 64 << 10

// Process-wide settings (--module-setting NAME=VALUE), per mirror cluster.
const (
	// SettingConcurrency is how many mirror requests may be in flight to one mirror cluster.
	SettingConcurrency = "mirror.concurrency"
	// SettingQueue is how many copies may wait for a free slot; past it copies are dropped.
	SettingQueue = "mirror.queue"
	// SettingTimeout bounds one mirror request, connecting included.
	SettingTimeout = "mirror.timeout"
)

// Defaults of the settings.
const (
	DefaultConcurrency = 32
	DefaultQueue       = 128
	DefaultTimeout     = 10 * time.Second
)

// Config is the config of one RequestMirror filter: where the copies go and how many.
type Config struct {
	// Cluster is the snapshot cluster of the mirror's backendRef, which the controller resolved.
	Cluster string `json:"cluster"`
	// Route is the route object ("HTTPRoute/<namespace>/<name>"), the metric's route label.
	Route string `json:"route,omitempty"`
	// Fraction is the share of requests mirrored; nil mirrors every request.
	Fraction *Fraction `json:"fraction,omitempty"`
}

// Fraction is Numerator out of every Denominator requests (Numerator ≤ Denominator, Denominator ≥ 1).
type Fraction struct {
	Numerator   uint32 `json:"numerator"`
	Denominator uint32 `json:"denominator"`
}
