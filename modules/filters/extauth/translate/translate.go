// Package translate is the controller half of the CoxswainExternalAuth filter: the resolvers
// "translate.filter.ext.gateway.coxswain-labs.dev.CoxswainExternalAuth" and its alias kind's
// "....ExternalAuth". It resolves backendRef as a route's backendRef is resolved (a Service in
// another namespace needs a ReferenceGrant from the object's group and kind), puts its cluster
// into the snapshot — cleartext HTTP/2 for GRPC — and hands the proxy module the cluster's name.
//
// A backendRef that does not resolve does not fail the rule: the module gets a config with
// unresolved set and answers 503, and the route's ResolvedRefs=False says why. Authorization
// that cannot run must neither let requests through nor look like a gateway bug (500).
package translate

import (
	"encoding/json"
	"errors"
	"fmt"

	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/core"
	"github.com/coxswain-labs/coxswain/modules/filters/extauth"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

// ModuleID is the resolver of extauth.ModuleID (also for ExtensionRefs of its alias kind
// ExternalAuth, which the controller resolves to CoxswainExternalAuth).
var ModuleID = translation.ExtensionResolverID(extauth.ModuleID)

func init() { core.RegisterModule(Resolver{}) }

var _ translation.ExtensionResolver = Resolver{}

// Resolver is the module.
type Resolver struct{}

// CoxswainModule implements core.Module.
func (Resolver) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: ModuleID, New: func() core.Module { return Resolver{} }}
}

// Resolve implements translation.ExtensionResolver.
func (Resolver) Resolve(rc translation.ResolveContext, obj translation.Object, raw json.RawMessage) (json.RawMessage, error) {
	return Resolve(rc, obj.GetNamespace()+"/"+obj.GetName(), raw)
}

// Resolve turns the spec raw of the object named name ("<namespace>/<name>") into the module's
// config. It is exported for the Gateway-attached policy's translator, which makes the same
// filter out of a CoxswainExternalAuth with targetRefs.
func Resolve(rc translation.ResolveContext, name string, raw json.RawMessage) (json.RawMessage, error) {
	var spec extauth.Spec
	if err := core.DecodeStrict(raw, &spec); err != nil {
		return nil, fmt.Errorf("invalid spec: %w", err)
	}
	cfg := extauth.Config{Spec: spec, Name: name}
	// The module checks everything else in CheckConfig, which the translator runs on this output.
	if spec.BackendRef.Name == "" || spec.BackendRef.Port == 0 {
		return nil, errors.New("invalid spec: backendRef needs a name and a port")
	}
	ref := gwapiv1.BackendObjectReference{
		Name: gwapiv1.ObjectName(spec.BackendRef.Name),
		Port: new(gwapiv1.PortNumber(spec.BackendRef.Port)),
	}
	if spec.BackendRef.Namespace != "" {
		ref.Namespace = new(gwapiv1.Namespace(spec.BackendRef.Namespace))
	}
	cluster, err := rc.Backend(ref, spec.Protocol == extauth.ProtocolGRPC)
	if err != nil {
		reason, msg := gwapiv1.RouteReasonBackendNotFound, err.Error()
		var f *translation.Failure
		if errors.As(err, &f) {
			reason, msg = f.Reason, f.Message
		}
		cfg.Unresolved = msg
		rc.Unresolved(reason, "backendRef: %s; requests are answered 503", msg)
	} else {
		cfg.Cluster = cluster
	}
	return json.Marshal(cfg)
}
