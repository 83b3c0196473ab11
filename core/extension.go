package core

import (
	"fmt"
	"strings"
)

// ExtensionNamespace is the namespace of ExtensionRef filter modules: "filter.ext.<group>.<Kind>",
// where <group> is the referenced object's API group and <Kind> its kind, exactly as an
// HTTPRouteFilter's extensionRef names them ("filter.ext.gateway.coxswain-labs.dev.RateLimit").
const ExtensionNamespace = "filter.ext"

// ExtensionModuleID is the module that serves ExtensionRef filters referring to objects of group
// and kind.
func ExtensionModuleID(group, kind string) ModuleID {
	return ModuleID(ExtensionNamespace + "." + group + "." + kind)
}

// ExtensionAPI names the Kubernetes resource behind an ExtensionRef filter module, in plain
// strings so that a proxy-side module declares it without importing Kubernetes.
type ExtensionAPI struct {
	// Group and Kind are what an extensionRef names; they must match the module ID.
	Group, Kind string
	// Version is the API version the controller watches and standalone files are read at
	// ("v1alpha1"); Resource is its plural ("ratelimits").
	Version, Resource string
	// FailOpen serves a rule whose ExtensionRef names an object that does not exist without the
	// filter (the route still gets ResolvedRefs=False, reason FilterNotFound). The default, as
	// Gateway API asks of a filter that cannot run, is the rule answering 500. Only the missing
	// object fails open: an object that exists but is invalid always fails the rule.
	FailOpen bool
	// Alias is another kind an extensionRef of Group may name for the same objects and module
	// ("ExternalAuth" for CoxswainExternalAuth): the controller resolves it to Kind, so the object
	// looked up, the ReferenceGrant checked and the module run are Kind's. One string, not a
	// list, so that ExtensionAPI stays a comparable value. Empty: none.
	Alias string
}

// ExtensionRouteKinds is optionally implemented by an ExtensionKind that serves the rules of some
// route kinds only (ExtensionAPI stays a comparable value, so it is a method, not a field).
// Supported are the route kinds whose rules may reference the filter ("HTTPRoute",
// "GRPCRoute"); a reference from another kind fails its rule (UnsupportedValue), as a filter that
// cannot run must, unless the kind is among ignored: there the reference is accepted but not
// enforced, the rule is served without the filter and the route's ResolvedRefs message says so.
// Without it, every route kind with filters may use the filter.
type ExtensionRouteKinds interface {
	ExtensionRouteKinds() (supported, ignored []string)
}

// ConfigWarner is optionally implemented by a module whose config may hold parts it accepts but
// does not serve as written (an entry it skips, a value it replaces by the default). The
// controller calls it, after the strict decode and CheckConfig, on every ExtensionRef's config
// and shows each message on the route; the proxy module logs the same at Provision.
type ConfigWarner interface {
	ConfigWarnings() []string
}

// ExtensionKind is implemented by every filter.ext.* module: it declares the resource whose
// objects its ExtensionRefs name. The controller watches that resource (once its CRD is served)
// and, by default, copies the referenced object's .spec into the module's config, which the proxy
// decodes strictly into the module: the module's JSON fields are the resource's spec fields.
type ExtensionKind interface {
	Module
	ExtensionAPI() ExtensionAPI
}

// Check reports whether the declaration is complete and matches module id.
func (a ExtensionAPI) Check(id ModuleID) error {
	if a.Group == "" || a.Kind == "" || a.Version == "" || a.Resource == "" {
		return fmt.Errorf("module %s: ExtensionAPI needs Group, Kind, Version and Resource (got %+v)", id, a)
	}
	if a.Resource != strings.ToLower(a.Resource) {
		return fmt.Errorf("module %s: ExtensionAPI resource %q must be lower case", id, a.Resource)
	}
	if want := ExtensionModuleID(a.Group, a.Kind); want != id {
		return fmt.Errorf("module %s declares %s/%s, whose module ID is %s", id, a.Group, a.Kind, want)
	}
	if a.Alias == a.Kind {
		return fmt.Errorf("module %s: ExtensionAPI alias %q is its kind", id, a.Alias)
	}
	return nil
}

// Extensions returns the ExtensionAPI of every filter.ext.* module in r, by module ID, and an error
// for each module of that namespace that declares none or a wrong one.
func (r *Registry) Extensions() (map[ModuleID]ExtensionAPI, []error) {
	out := map[ModuleID]ExtensionAPI{}
	var errs []error
	for _, id := range r.ids {
		if !strings.HasPrefix(string(id), ExtensionNamespace+".") {
			continue
		}
		ek, ok := r.byID[id].New().(ExtensionKind)
		if !ok {
			errs = append(errs, fmt.Errorf("module %s is in namespace %s but does not implement core.ExtensionKind", id, ExtensionNamespace))
			continue
		}
		api := ek.ExtensionAPI()
		if err := api.Check(id); err != nil {
			errs = append(errs, err)
			continue
		}
		out[id] = api
	}
	return out, errs
}
