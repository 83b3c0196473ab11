// Package translate is the controller half of the BasicAuth filter,
// "translate.filter.ext.gateway.coxswain-labs.dev.BasicAuth": it reads the Secret a BasicAuth
// names and hands the proxy module the parsed users, so no proxy ever reads a Secret.
//
// A Secret that cannot be used — missing, without the ingress.coxswain-labs.dev/auth-basic:
// "true" label, in another namespace without a ReferenceGrant, or without one usable htpasswd
// line — does not fail the rule: the module gets a closed config and answers 503, and the
// route's ResolvedRefs=False says why. Authentication that cannot run must neither let
// requests through nor look like a gateway bug (500).
package translate

import (
	"encoding/json"
	"errors"
	"fmt"

	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/core"
	"github.com/coxswain-labs/coxswain/modules/filters/basicauth"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

// ModuleID is the resolver of basicauth.ModuleID.
var ModuleID = translation.ExtensionResolverID(basicauth.ModuleID)

// ReasonInvalidSecret is the ResolvedRefs reason of a Secret that exists but cannot be used: no
// label, no "auth" key, no usable htpasswd line.
const ReasonInvalidSecret gwapiv1.RouteConditionReason = "InvalidSecret"

func init() {
	core.RegisterModule(Resolver{})
}

var (
	_ translation.ExtensionResolver = Resolver{}
	_ translation.SecretSelector    = Resolver{}
)

// Resolver is the module.
type Resolver struct{}

// CoxswainModule implements core.Module.
func (Resolver) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: ModuleID, New: func() core.Module { return Resolver{} }}
}

// SecretLabelSelector implements translation.SecretSelector: the controller watches the Secrets
// with the BasicAuth label, and only those (besides TLS ones).
func (Resolver) SecretLabelSelector() string { return basicauth.SecretLabel + "=true" }

// Resolve implements translation.ExtensionResolver.
func (Resolver) Resolve(rc translation.ResolveContext, obj translation.Object, raw json.RawMessage) (json.RawMessage, error) {
	var spec basicauth.Spec
	if err := core.DecodeStrict(raw, &spec); err != nil {
		return nil, fmt.Errorf("invalid spec: %w", err)
	}
	if spec.SecretRef.Name == "" {
		return nil, errors.New("invalid spec: secretRef.name is required")
	}
	cfg := basicauth.Config{Realm: spec.Realm, ForwardCredentials: spec.ForwardCredentials}
	if cfg.Realm == "" {
		cfg.Realm = obj.GetNamespace() + "/" + obj.GetName()
	}
	users, reason, why := readSecret(rc, spec.SecretRef)
	if why != "" {
		cfg.Closed = why
		rc.Unresolved(reason, "%s; requests are answered 503", why)
	}
	cfg.Users = users
	// The module checks the realm (and everything else) in CheckConfig, which the translator
	// runs on this output: an invalid realm is UnsupportedValue, its rule answering 500.
	return json.Marshal(cfg)
}

// readSecret returns the users of the Secret ref names, or the reason and message of why there
// are none. Skipped htpasswd lines are warnings on the route.
func readSecret(rc translation.ResolveContext, ref basicauth.SecretRef) ([]basicauth.User, gwapiv1.RouteConditionReason, string) {
	ns := ref.Namespace
	if ns == "" {
		ns = rc.Namespace()
	}
	sec, err := rc.Secret(ns, ref.Name)
	if err != nil {
		var f *translation.Failure
		if errors.As(err, &f) {
			if f.Reason == translation.RouteReasonSecretNotFound {
				return nil, f.Reason, fmt.Sprintf("%s (a Secret for BasicAuth needs the label %s: \"true\")", f.Message, basicauth.SecretLabel)
			}
			return nil, f.Reason, f.Message
		}
		return nil, ReasonInvalidSecret, err.Error()
	}
	what := fmt.Sprintf("Secret %s/%s", ns, ref.Name)
	if sec.Labels[basicauth.SecretLabel] != "true" {
		return nil, ReasonInvalidSecret, fmt.Sprintf("%s does not have the label %s: \"true\"", what, basicauth.SecretLabel)
	}
	data, ok := sec.Data[basicauth.SecretKey]
	if !ok {
		return nil, ReasonInvalidSecret, fmt.Sprintf("%s has no key %q (an htpasswd file)", what, basicauth.SecretKey)
	}
	users, warnings := basicauth.ParseHtpasswd(data)
	for _, w := range warnings {
		rc.Warn("%s: %s", what, w)
	}
	if len(users) == 0 {
		return nil, ReasonInvalidSecret, fmt.Sprintf("%s: its %q key has no usable htpasswd entry (bcrypt or {SHA})", what, basicauth.SecretKey)
	}
	return users, "", ""
}
