// Package translate is the controller half of the RateLimit filter: the resolver
// "translate.filter.ext.gateway.coxswain-labs.dev.RateLimit", which gives the proxy module the
// object's spec plus its zone, "<namespace>/<name>". The zone is what ties buckets to the
// object rather than to a route: every rule referencing the object shares one limit, and a
// snapshot that changes something else keeps the buckets (the proxy keys its shared state by
// zone and spec hash). Users cannot set it: a spec with a zone field is rejected.
package translate

import (
	"encoding/json"
	"fmt"

	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/core"
	"github.com/coxswain-labs/coxswain/modules/filters/ratelimit"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

func init() { core.RegisterModule(Resolver{}) }

// ModuleID is the resolver's module ID.
var ModuleID = translation.ExtensionResolverID(ratelimit.ModuleID)

// Resolver adds the zone to a RateLimit's spec.
type Resolver struct{}

var _ translation.ExtensionResolver = Resolver{}

// CoxswainModule implements core.Module.
func (Resolver) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: ModuleID, New: func() core.Module { return Resolver{} }}
}

// Resolve implements translation.ExtensionResolver.
func (Resolver) Resolve(_ translation.ResolveContext, obj translation.Object, spec json.RawMessage) (json.RawMessage, error) {
	var s ratelimit.Spec
	if err := core.DecodeStrict(spec, &s); err != nil {
		var probe map[string]json.RawMessage
		if json.Unmarshal(spec, &probe) == nil {
			if _, ok := probe["zone"]; ok {
				return nil, translation.Fail("", gwapiv1.RouteReasonUnsupportedValue,
					"invalid spec: zone is set by the controller (it is the object's namespace/name), not in the spec")
			}
		}
		return nil, fmt.Errorf("invalid spec: %w", err)
	}
	out, err := json.Marshal(ratelimit.Config{Spec: s, Zone: obj.GetNamespace() + "/" + obj.GetName()})
	if err != nil {
		return nil, err
	}
	return out, nil
}
