// Package testmod holds small but real modules for the engine's tests: a path-prefix matcher
// ("route.testpath"), a matcher with its own error format ("route.testerrors") and filters of each
// kind. They go through the real loading path (strict JSON, Provision, Validate, Cleanup); only
// tests import this package.
package testmod

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coxswain-labs/coxswain/core"
)

// Modules returns one of each test module, for core.NewRegistry.
func Modules() []core.Module {
	return []core.Module{&PathMatcher{}, &ErrorMatcher{}, &SetRequestHeader{}, &SetResponseHeader{},
		&Respond{}, &Wrap{}, &Mutate{}, &Inert{}, &Probe{}, &Feedback{}, &Tripwire{}, &BodyLimit{}}
}

// PathMatcher ("route.testpath") matches requests whose path starts with Prefix.
type PathMatcher struct {
	Prefix string `json:"prefix"`
	// Tag names the instance for Cleanups.
	Tag string `json:"tag,omitempty"`
}

var (
	_ core.HTTPMatcher  = (*PathMatcher)(nil)
	_ core.Validator    = (*PathMatcher)(nil)
	_ core.CleanerUpper = (*PathMatcher)(nil)
)

func (*PathMatcher) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: "route.testpath", New: func() core.Module { return new(PathMatcher) }}
}

func (m *PathMatcher) Validate() error {
	if !strings.HasPrefix(m.Prefix, "/") {
		return errors.New("prefix must start with /")
	}
	return nil
}

func (m *PathMatcher) Match(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, m.Prefix) }

func (m *PathMatcher) Cleanup() error {
	if m.Tag != "" {
		countCleanup(m.Tag)
	}
	return nil
}

// ErrorMatcher ("route.testerrors") matches like PathMatcher and answers engine errors with a
// header X-Error-Status and a fixed body, as a gRPC matcher would answer with grpc-status.
type ErrorMatcher struct {
	PathMatcher
}

var _ core.HTTPErrorWriter = (*ErrorMatcher)(nil)

func (*ErrorMatcher) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: "route.testerrors", New: func() core.Module { return new(ErrorMatcher) }}
}

func (*ErrorMatcher) WriteError(w http.ResponseWriter, _ *http.Request, status int, _ string) {
	w.Header().Set("X-Error-Status", strconv.Itoa(status))
	w.WriteHeader(status)
	_, _ = w.Write([]byte("custom error"))
}

var (
	_ core.HTTPRequestFilter  = (*SetRequestHeader)(nil)
	_ core.HTTPResponseFilter = (*SetResponseHeader)(nil)
	_ core.HTTPRequestFilter  = (*Respond)(nil)
	_ core.HTTPMiddleware     = (*Wrap)(nil)
	_ core.Balancer           = (*Probe)(nil)
)

// SetRequestHeader ("filter.test.set_request_header") sets a request header.
type SetRequestHeader struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

func (*SetRequestHeader) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: "filter.test.set_request_header", New: func() core.Module { return new(SetRequestHeader) }}
}

func (f *SetRequestHeader) FilterRequest(_ http.ResponseWriter, r *http.Request) bool {
	r.Header.Set(f.Name, f.Value)
	return true
}

// SetResponseHeader ("filter.test.set_response_header") sets a header on the upstream response and
// records the status it saw in X-Seen-Status.
type SetResponseHeader struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

func (*SetResponseHeader) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: "filter.test.set_response_header", New: func() core.Module { return new(SetResponseHeader) }}
}

func (f *SetResponseHeader) FilterResponse(_ *http.Request, status int, h http.Header) {
	h.Set(f.Name, f.Value)
	h.Set("X-Seen-Status", strconv.Itoa(status))
}

// Respond ("filter.test.respond") answers every request itself with Status.
type Respond struct {
	Status int `json:"status"`
}

func (*Respond) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: "filter.test.respond", New: func() core.Module { return new(Respond) }}
}

func (f *Respond) FilterRequest(w http.ResponseWriter, _ *http.Request) bool {
	w.WriteHeader(f.Status)
	return false
}

// Wrap ("filter.test.wrap") is a middleware adding a response header before the rest runs.
type Wrap struct {
	Header string `json:"header"`
}

func (*Wrap) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: "filter.test.wrap", New: func() core.Module { return new(Wrap) }}
}

func (f *Wrap) WrapHTTP(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add(f.Header, "wrapped")
		next.ServeHTTP(w, r)
	})
}

// Mutate ("filter.test.mutate") rewrites the request's path and Host, where set: what a listener
// filter may (the path, which routing then sees) and may not (the Host) do.
type Mutate struct {
	Path string `json:"path,omitempty"`
	Host string `json:"host,omitempty"`
}

func (*Mutate) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: "filter.test.mutate", New: func() core.Module { return new(Mutate) }}
}

func (f *Mutate) FilterRequest(_ http.ResponseWriter, r *http.Request) bool {
	if f.Path != "" {
		r.URL.Path = f.Path
	}
	if f.Host != "" {
		r.Host = f.Host
	}
	return true
}

// Inert ("filter.test.inert") implements no filter interface: loading it as a filter must fail.
type Inert struct{}

func (*Inert) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: "filter.test.inert", New: func() core.Module { return new(Inert) }}
}

// Probe ("lb.test_probe") always picks the first endpoint and publishes it (LastPicked), so a test
// backend can watch the engine's in-flight counter from inside a request.
type Probe struct{ eps []*core.Endpoint }

var lastPicked atomic.Pointer[core.Endpoint]

func (*Probe) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: "lb.test_probe", New: func() core.Module { return new(Probe) }}
}

func (p *Probe) SetEndpoints(eps []*core.Endpoint) { p.eps = eps }

func (p *Probe) Pick(*core.PickInfo) *core.Endpoint {
	if len(p.eps) == 0 {
		return nil
	}
	lastPicked.Store(p.eps[0])
	return p.eps[0]
}

// LastPicked is the endpoint a Probe picked last.
func LastPicked() *core.Endpoint { return lastPicked.Load() }

// Feedback ("lb.test_feedback") picks as Probe does and sends every core.BalancerFeedback call it
// gets on FeedbackCalls (dropped when nobody reads and the buffer is full).
type Feedback struct{ Probe }

var _ core.BalancerFeedback = (*Feedback)(nil)

// FeedbackCall is one Done.
type FeedbackCall struct {
	Endpoint *core.Endpoint
	RTT      time.Duration
	Failed   bool
}

// FeedbackCalls receives the Feedback balancers' Done calls.
var FeedbackCalls = make(chan FeedbackCall, 64)

func (*Feedback) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: "lb.test_feedback", New: func() core.Module { return new(Feedback) }}
}

func (*Feedback) Done(ep *core.Endpoint, rtt time.Duration, failed bool) {
	select {
	case FeedbackCalls <- FeedbackCall{ep, rtt, failed}:
	default:
	}
}

var (
	cleanMu  sync.Mutex
	cleanups = map[string]int{}
)

func countCleanup(tag string) {
	cleanMu.Lock()
	cleanups[tag]++
	cleanMu.Unlock()
}

// Cleanups is how many PathMatchers tagged tag have been cleaned up.
func Cleanups(tag string) int {
	cleanMu.Lock()
	defer cleanMu.Unlock()
	return cleanups[tag]
}

// Tripwire ("filter.test.tripwire") counts how often it is provisioned (Provisions), so a test
// can prove that a module no snapshot names is never provisioned.
type Tripwire struct{}

var tripwires atomic.Int64

func (*Tripwire) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: "filter.test.tripwire", New: func() core.Module { return new(Tripwire) }}
}

func (*Tripwire) Provision(*core.BuildContext) error {
	tripwires.Add(1)
	return nil
}

func (*Tripwire) FilterRequest(http.ResponseWriter, *http.Request) bool { return true }

// Provisions is how often a Tripwire has been provisioned in this process.
func Provisions() int64 { return tripwires.Load() }

// BodyLimit ("filter.test.body_limit") refuses a request body longer than Limit bytes the way a
// real size limit does: its reader fails with core.ErrBodyTooLarge once the limit is passed.
type BodyLimit struct {
	Limit int64 `json:"limit"`
}

func (*BodyLimit) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: "filter.test.body_limit", New: func() core.Module { return new(BodyLimit) }}
}

func (f *BodyLimit) FilterRequest(_ http.ResponseWriter, r *http.Request) bool {
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = &limitedBody{ReadCloser: r.Body, left: f.Limit}
	}
	return true
}

type limitedBody struct {
	io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if b.left -= int64(n); b.left < 0 {
		return 0, core.ErrBodyTooLarge
	}
	return n, err
}
