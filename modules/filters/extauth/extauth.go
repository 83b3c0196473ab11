// Package extauth is the external authorization filter,
// "filter.ext.gateway.coxswain-labs.dev.CoxswainExternalAuth" (and its alias kind ExternalAuth):
// before a request goes upstream, an auth service of the cluster decides. Over HTTP
// (forward-auth) the request's method, Host, path, query and headers are replayed to it and a 2xx
// allows; over gRPC it is asked envoy.service.auth.v3.Authorization/Check. A denial — with the
// service's status, headers and body — goes back to the client; an allowing answer may add
// headers to the upstream request (allowedResponseHeaders).
//
// The auth service is a Service the controller resolves into a snapshot cluster (Config.Cluster);
// each check picks one of its current endpoints, so auth pods coming and going are followed in
// place. Connections are pooled per cluster in state shared across routing tables (core.Shared):
// keep-alive HTTP/1.1 connections, or one gRPC ClientConn per endpoint, closed when the last
// table that uses the cluster is retired.
//
// Failures: an auth service that cannot be asked (refused, reset, past the timeout, a 5xx or a
// gRPC error) answers 503 when failClosed (the default) and lets the request through otherwise;
// a backend that did not resolve or has no ready endpoint is always 503. A gRPC client gets a
// gRPC status: 401 UNAUTHENTICATED, 403 PERMISSION_DENIED, a failure UNAVAILABLE.
package extauth

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/coxswain-labs/coxswain/core"
)

func init() {
	core.RegisterModule((*ExternalAuth)(nil))
}

var (
	_ core.ExtensionKind       = (*ExternalAuth)(nil)
	_ core.ExtensionRouteKinds = (*ExternalAuth)(nil)
	_ core.HTTPRequestFilter   = (*ExternalAuth)(nil)
	_ core.Provisioner         = (*ExternalAuth)(nil)
	_ core.ConfigChecker       = (*ExternalAuth)(nil)
)

// API is the resource behind this module's ExtensionRefs. An ExtensionRef naming an object that
// does not exist fails the rule (500) rather than serving it unauthenticated: unlike Coxswain's
// other kinds, this one does not fail open.
var API = core.ExtensionAPI{
	Group:    "gateway.coxswain-labs.dev",
	Kind:     "CoxswainExternalAuth",
	Version:  "v1alpha1",
	Resource: "coxswainexternalauths",
	// The spelling the product docs' examples use; the controller resolves it to Kind.
	Alias: "ExternalAuth",
}

// Results of a check, the values of the metric's result label.
const (
	resultAllowed = "allowed"
	resultDenied  = "denied"
	resultError   = "error"
)

// ExternalAuth is the module.
type ExternalAuth struct {
	Config

	log        *zap.Logger
	label      string // the metric's auth label
	timeout    time.Duration
	failClosed bool
	allowed    []string // canonical AllowedResponseHeaders
	allowAll   bool     // GRPC with no AllowedResponseHeaders: every mutation applies
	closed     string   // non-empty: every request is answered 503, and this is why
	cluster    core.Cluster
	checker    checker
	counts     [3]prometheus.Counter // allowed, denied, error
	lastWarn   atomic.Int64          // unix nanos of the last fail-open WARN
}

// CoxswainModule implements core.Module.
func (*ExternalAuth) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: ModuleID, New: func() core.Module { return new(ExternalAuth) }}
}

// ExtensionAPI implements core.ExtensionKind.
func (*ExternalAuth) ExtensionAPI() core.ExtensionAPI { return API }

// ExtensionRouteKinds implements core.ExtensionRouteKinds.
func (*ExternalAuth) ExtensionRouteKinds() (supported, ignored []string) {
	return []string{"HTTPRoute", "Ingress", "GRPCRoute"}, nil
}

// CheckConfig implements core.ConfigChecker.
func (f *ExternalAuth) CheckConfig() error { return f.compile() }

// compile checks the config and derives what requests use.
func (f *ExternalAuth) compile() error {
	switch f.Protocol {
	case ProtocolHTTP, ProtocolGRPC:
	case "":
		return errors.New("protocol is required (HTTP or GRPC)")
	default:
		return fmt.Errorf("protocol %q is not supported (HTTP or GRPC)", f.Protocol)
	}
	if f.BackendRef.Name == "" {
		return errors.New("backendRef.name is required")
	}
	if f.BackendRef.Port < 1 || f.BackendRef.Port > 65535 {
		return fmt.Errorf("backendRef.port %d is not a port", f.BackendRef.Port)
	}
	f.timeout = DefaultTimeout
	if f.Timeout != "" {
		d, err := time.ParseDuration(f.Timeout)
		if err != nil || d <= 0 {
			return fmt.Errorf("timeout %q is not a positive duration", f.Timeout)
		}
		f.timeout = d
	}
	f.failClosed = f.FailClosed == nil || *f.FailClosed
	f.allowed = f.allowed[:0]
	for i, h := range f.AllowedResponseHeaders {
		if !validHeaderName(h) {
			return fmt.Errorf("allowedResponseHeaders[%d]: %q is not a header name", i, h)
		}
		c := http.CanonicalHeaderKey(h)
		if forbidden(c) {
			return fmt.Errorf("allowedResponseHeaders[%d]: %s cannot be set by an auth service", i, c)
		}
		if !slices.Contains(f.allowed, c) {
			f.allowed = append(f.allowed, c)
		}
	}
	f.allowAll = f.Protocol == ProtocolGRPC && len(f.allowed) == 0
	return nil
}

// Provision checks the config, finds the auth service's cluster and its shared connection pool.
func (f *ExternalAuth) Provision(bc *core.BuildContext) error {
	if err := f.compile(); err != nil {
		return err
	}
	f.log = bc.Log
	f.label = f.Name
	if f.label == "" {
		f.label = f.Cluster
	}
	vec, err := bc.Metrics.CounterVec("coxswain_extauth_checks_total",
		"External authorization checks, by auth object and result (allowed, denied, error).", "auth", "result")
	if err != nil {
		return err
	}
	for i, r := range []string{resultAllowed, resultDenied, resultError} {
		f.counts[i] = vec.WithLabelValues(f.label, r)
	}
	switch {
	case f.Unresolved != "":
		f.closed = "the auth service is not resolved: " + f.Unresolved
	case f.Cluster == "":
		f.closed = "the auth service is not resolved: this build has no resolver for " + API.Kind
	case bc.Clusters == nil:
		f.closed = "no clusters in this build context"
	default:
		c, err := bc.Clusters.Cluster(f.Cluster)
		if err != nil {
			f.closed = err.Error()
			break
		}
		f.cluster = c
		if f.Protocol == ProtocolGRPC {
			f.checker, err = core.Shared(bc, ModuleID+"/grpc/"+c.Name(), func() (*grpcPool, error) {
				return newGRPCPool(c.ConnectTimeout()), nil
			})
		} else {
			f.checker, err = core.Shared(bc, fmt.Sprintf("%s/http/%s/%s", ModuleID, c.Name(), c.ConnectTimeout()), func() (*httpPool, error) {
				return newHTTPPool(c.ConnectTimeout()), nil
			})
		}
		if err != nil {
			return err
		}
	}
	if f.closed != "" {
		bc.Log.Error("external auth cannot run: requests are answered 503", zap.String("auth", f.label), zap.String("reason", f.closed))
	}
	return nil
}

// FilterRequest asks the auth service and lets the request through, with the headers it allows
// applied, only when it allows.
func (f *ExternalAuth) FilterRequest(w http.ResponseWriter, r *http.Request) bool {
	if f.closed != "" {
		f.counts[2].Inc()
		core.Deny(w, r, http.StatusServiceUnavailable, core.GRPCUnavailable, "authorization unavailable")
		return false
	}
	ep := f.cluster.Pick(&core.PickInfo{Request: r, Client: core.ClientAddr(r)})
	if ep == nil {
		f.counts[2].Inc()
		core.Deny(w, r, http.StatusServiceUnavailable, core.GRPCUnavailable, "authorization unavailable: the auth service has no ready endpoint")
		return false
	}
	ctx, cancel := contextWithTimeout(r, f.timeout)
	ep.Active.Add(1)
	d := f.checker.check(ctx, ep, r, f)
	ep.Active.Add(-1)
	cancel()
	switch {
	case d.err != nil:
		f.counts[2].Inc()
		if f.failClosed {
			f.log.Debug("auth check failed: answered 503", zap.String("auth", f.label), zap.String("endpoint", ep.HostPort), zap.Error(d.err))
			core.Deny(w, r, http.StatusServiceUnavailable, core.GRPCUnavailable, "authorization unavailable")
			return false
		}
		f.warnFailOpen(ep, d.err)
		return true
	case !d.allow:
		f.counts[1].Inc()
		f.deny(w, r, d)
		return false
	}
	f.counts[0].Inc()
	return true
}

// warnFailOpen logs a check that failed and let the request through, at most once per 10s.
func (f *ExternalAuth) warnFailOpen(ep *core.Endpoint, err error) {
	now := time.Now().UnixNano()
	last := f.lastWarn.Load()
	if now-last < int64(10*time.Second) || !f.lastWarn.CompareAndSwap(last, now) {
		return
	}
	f.log.Warn("auth check failed: request let through (failClosed: false)", zap.String("auth", f.label),
		zap.String("endpoint", ep.HostPort), zap.Error(err))
}

// deny writes the auth service's denial: its status, headers and body, or for a gRPC call the
// matching gRPC status with the body as its message.
func (f *ExternalAuth) deny(w http.ResponseWriter, r *http.Request, d decision) {
	h := w.Header()
	for k, vv := range d.header {
		if hopHeader(k) || k == "Content-Length" {
			continue
		}
		h[k] = vv
	}
	status := d.status
	if status == 0 {
		status = http.StatusForbidden
	}
	if core.IsGRPC(r) {
		delete(h, "Content-Type")
		msg := strings.TrimSpace(string(d.body))
		if len(msg) > 1024 {
			msg = msg[:1024]
		}
		if msg == "" {
			msg = http.StatusText(status)
		}
		core.WriteGRPCStatus(w, grpcCode(status), msg)
		return
	}
	w.WriteHeader(status)
	if len(d.body) > 0 && r.Method != http.MethodHead {
		_, _ = w.Write(d.body)
	}
}

// grpcCode is the gRPC status of a denial's HTTP status.
func grpcCode(status int) core.GRPCCode {
	switch status {
	case http.StatusUnauthorized:
		return core.GRPCUnauthenticated
	case http.StatusTooManyRequests:
		return core.GRPCResourceExhausted
	case http.StatusBadRequest:
		return core.GRPCInvalidArgument
	}
	if status >= 500 {
		return core.GRPCUnavailable
	}
	return core.GRPCPermissionDenied
}

// mayMutate reports whether an allowing answer may set or remove the upstream request header k
// (canonical).
func (f *ExternalAuth) mayMutate(k string) bool {
	if forbidden(k) {
		return false
	}
	return f.allowAll || slices.Contains(f.allowed, k)
}

// forbidden are headers an auth service never sets on the upstream request: the connection's,
// the framing's, and those the proxy writes itself.
func forbidden(k string) bool {
	return hopHeader(k) || k == "Host" || k == "Content-Length" || strings.HasPrefix(k, ":")
}

// hopHeader reports whether k (canonical) describes a connection rather than a message.
func hopHeader(k string) bool {
	switch k {
	case "Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
		"Te", "Trailer", "Transfer-Encoding", "Upgrade":
		return true
	}
	return false
}

// validHeaderName reports whether s is an HTTP field name (an RFC 9110 token).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}
