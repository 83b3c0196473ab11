// Package translate is the controller half of the JwtAuth filter: the resolver
// "translate.filter.ext.gateway.coxswain-labs.dev.JwtAuth", which puts the keys into the module's
// config. An inline JWKS is copied; a remote one is read with ResolveContext.Document, so the
// controller (or `coxswain serve`) fetches and refreshes it and a proxy never does. Until a
// remote JWKS has been fetched (or while what was fetched has no usable key) the config says
// "unresolved": the rule answers 503, and the route has ResolvedRefs=False, reason
// JWKSUnavailable, with the fetch's error.
package translate

import (
	"encoding/json"
	"fmt"
	"time"

	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/core"
	"github.com/coxswain-labs/coxswain/modules/filters/jwtauth"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

func init() {
	core.RegisterModule(Resolver{})
}

// ModuleID is the resolver's module ID.
var ModuleID = translation.ExtensionResolverID(jwtauth.ModuleID)

// ReasonJWKSUnavailable is the ResolvedRefs reason of a JwtAuth whose remote JWKS is not known.
const ReasonJWKSUnavailable gwapiv1.RouteConditionReason = "JWKSUnavailable"

// DefaultRefresh is the refresh interval of a remote JWKS without refreshInterval; MinRefresh is
// the shortest accepted.
const (
	DefaultRefresh = 5 * time.Minute
	MinRefresh     = time.Second
)

// Resolver is the module.
type Resolver struct{}

var _ translation.ExtensionResolver = Resolver{}

// CoxswainModule implements core.Module.
func (Resolver) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: ModuleID, New: func() core.Module { return Resolver{} }}
}

// Resolve implements translation.ExtensionResolver.
func (Resolver) Resolve(rc translation.ResolveContext, _ translation.Object, spec json.RawMessage) (json.RawMessage, error) {
	var s jwtauth.Spec
	if err := core.DecodeStrict(spec, &s); err != nil {
		return nil, translation.Fail("", gwapiv1.RouteReasonUnsupportedValue, "invalid spec: %v", err)
	}
	cfg := jwtauth.Config{Settings: s.Settings, JWKS: jwtauth.JWKS{JWKSSource: jwtauth.JWKSSource{Inline: s.JWKS.Inline}}}
	if r := s.JWKS.Remote; r != nil {
		if s.JWKS.Inline != "" {
			return nil, translation.Fail("", gwapiv1.RouteReasonUnsupportedValue, "invalid spec: jwks: exactly one of remote and inline must be set")
		}
		refresh, err := refreshOf(rc, r.RefreshInterval)
		if err != nil {
			return nil, err
		}
		body, err := rc.Document(r.URI, refresh)
		if err == nil {
			if _, _, perr := jwtauth.ParseJWKS(body); perr != nil {
				err = fmt.Errorf("%s: %w", r.URI, perr)
			}
		}
		if err != nil {
			rc.Unresolved(ReasonJWKSUnavailable, "jwks.remote: %v; requests are answered 503 until the keys are fetched", err)
			cfg.JWKS = jwtauth.JWKS{Unresolved: err.Error()}
		} else {
			cfg.JWKS.Inline = string(body)
		}
	}
	return json.Marshal(cfg)
}

func refreshOf(rc translation.ResolveContext, s string) (time.Duration, error) {
	if s == "" {
		return DefaultRefresh, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, translation.Fail("", gwapiv1.RouteReasonUnsupportedValue, "invalid spec: jwks.remote.refreshInterval %q: %v", s, err)
	}
	if d < MinRefresh {
		rc.Warn("jwks.remote.refreshInterval %s is below %s; %s is used", s, MinRefresh, MinRefresh)
		d = MinRefresh
	}
	return d, nil
}
