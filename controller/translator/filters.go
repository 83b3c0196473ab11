package translator

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

// RouteReasonFilterNotFound is the ResolvedRefs reason of an ExtensionRef whose object does not
// exist. Gateway API defines no reason for it; the rule answers 500, as the spec requires of a
// filter that cannot run.
const RouteReasonFilterNotFound gwapiv1.RouteConditionReason = "FilterNotFound"

// repeatable are the filter types the API allows more than once per list.
var repeatable = map[gwapiv1.HTTPRouteFilterType]bool{
	gwapiv1.HTTPRouteFilterRequestMirror: true,
	gwapiv1.HTTPRouteFilterExtensionRef:  true,
}

// ruleFilters matches the field of a rule's own filter list (not a backendRef's): the list that
// Gateway-level filters are put in front of.
var ruleFilters = regexp.MustCompile(`^spec\.rules\[[0-9]+\]\.filters$`)

// standardFilterTypes are the filter types Gateway API defines, so that a build without a
// translator for one says it is not supported rather than unknown.
var standardFilterTypes = []gwapiv1.HTTPRouteFilterType{
	gwapiv1.HTTPRouteFilterRequestHeaderModifier, gwapiv1.HTTPRouteFilterResponseHeaderModifier,
	gwapiv1.HTTPRouteFilterRequestRedirect, gwapiv1.HTTPRouteFilterURLRewrite,
	gwapiv1.HTTPRouteFilterRequestMirror, gwapiv1.HTTPRouteFilterCORS, gwapiv1.HTTPRouteFilterExternalAuth,
	gwapiv1.HTTPRouteFilterExtensionRef,
}

// filterTranslators returns the translate.filter.* modules of reg by the filter type they
// translate, and an error for each module that claims a type an earlier one (by ID) has.
func filterTranslators(reg *core.Registry) (map[gwapiv1.HTTPRouteFilterType]translation.FilterTranslator, []error) {
	out := map[gwapiv1.HTTPRouteFilterType]translation.FilterTranslator{}
	var errs []error
	for _, id := range reg.Namespace(translation.FilterNamespace) {
		info, _ := reg.Lookup(id)
		ft, ok := info.New().(translation.FilterTranslator)
		if !ok {
			continue
		}
		if prev, dup := out[ft.FilterType()]; dup {
			errs = append(errs, fmt.Errorf("modules %s and %s both translate filter type %s; %s is used",
				prev.CoxswainModule().ID, id, ft.FilterType(), prev.CoxswainModule().ID))
			continue
		}
		out[ft.FilterType()] = ft
	}
	return out, errs
}

// filters is the one filter path of every route kind (translation.RouteContext.Filters): the
// list-level rules of Gateway API, then each filter by its translator.
func (t *session) filters(rc *routeContext, field string, fs []gwapiv1.HTTPRouteFilter, env translation.FilterEnv) ([]*irv1.ModuleConfig, *translation.Failure) {
	seen := map[gwapiv1.HTTPRouteFilterType]bool{}
	var out []*irv1.ModuleConfig
	env.Route, env.Backends = routeLabel(rc.st.key), filterBackends{rc} // filterbackend.go
	for i, f := range fs {
		ff := fmt.Sprintf("%s[%d]", field, i)
		if env.Types != nil && !slices.Contains(env.Types, f.Type) {
			return nil, translation.Fail(ff+".type", gwapiv1.RouteReasonUnsupportedValue, "filter type %q is not supported on %s", f.Type, env.Kind)
		}
		if seen[f.Type] && !repeatable[f.Type] {
			return nil, translation.Fail(ff+".type", gwapiv1.RouteReasonUnsupportedValue, "%s filter cannot be repeated", f.Type)
		}
		seen[f.Type] = true
		mc, fail := t.filter(rc, f, ff, env)
		if fail != nil {
			return nil, fail
		}
		if mc != nil { // nil: a fail-open ExtensionRef whose object is missing, already reported
			out = append(out, mc)
		}
	}
	if seen[gwapiv1.HTTPRouteFilterRequestRedirect] && seen[gwapiv1.HTTPRouteFilterURLRewrite] {
		return nil, translation.Fail(field, gwapiv1.RouteReasonIncompatibleFilters, "RequestRedirect and URLRewrite filters cannot be combined")
	}
	if ruleFilters.MatchString(field) {
		gw, fail := t.gatewayFilterConfigs(rc, field, env)
		if fail != nil {
			return nil, fail
		}
		if len(gw) > 0 {
			out = append(gw, out...) // the Gateway's mandate runs first: a route cannot remove it
		}
	}
	return out, nil
}

func (t *session) filter(rc *routeContext, f gwapiv1.HTTPRouteFilter, field string, env translation.FilterEnv) (*irv1.ModuleConfig, *translation.Failure) {
	if f.Type == gwapiv1.HTTPRouteFilterExtensionRef {
		if f.ExtensionRef == nil {
			return nil, translation.Fail(field+".extensionRef", gwapiv1.RouteReasonUnsupportedValue, "extensionRef must be set for filter type ExtensionRef")
		}
		return t.extensionFilter(rc, *f.ExtensionRef, field+".extensionRef", env)
	}
	if ft, ok := t.filterKinds[f.Type]; ok {
		if rft, ok := ft.(translation.ResolvingFilterTranslator); ok {
			owner := rc.st.key
			rsc := &resolveContext{t: t, namespace: owner.Namespace, from: schema.GroupKind{Group: owner.Group, Kind: owner.Kind},
				rc: rc, field: field, what: fmt.Sprintf("%s filter", f.Type)}
			return rft.TranslateResolved(rsc, env, f, field)
		}
		return ft.TranslateFilter(env, f, field)
	}
	if slices.Contains(standardFilterTypes, f.Type) {
		return nil, translation.Fail(field+".type", gwapiv1.RouteReasonUnsupportedValue,
			"filter type %s is not supported by this build (no %s.* module translates it)", f.Type, translation.FilterNamespace)
	}
	return nil, translation.Fail(field+".type", gwapiv1.RouteReasonUnsupportedValue, "unknown filter type %q", f.Type)
}

// extensionFilter is the default ExtensionRef translation: the filter.ext.<group>.<Kind> module
// gets the referenced object's .spec as its config (or what the kind's resolver makes of it),
// checked here as strictly as the proxy will decode it, so that a bad object shows in status. A
// missing object of a module that fails open (core.ExtensionAPI.FailOpen) is reported on the route
// and gives no config and no failure: the rule is served without the filter.
func (t *session) extensionFilter(rc *routeContext, ref gwapiv1.LocalObjectReference, field string, env translation.FilterEnv) (*irv1.ModuleConfig, *translation.Failure) {
	group, kind := string(ref.Group), string(ref.Kind)
	what := fmt.Sprintf("ExtensionRef %s %s", groupKind(group, kind), ref.Name)
	if canonical, ok := t.aliases[schema.GroupKind{Group: group, Kind: kind}]; ok {
		kind = canonical // the alias's objects, module and ReferenceGrants are the kind's
	}
	id := core.ExtensionModuleID(group, kind)
	if _, ok := t.opts.Registry.Lookup(id); !ok {
		return nil, &translation.Failure{Field: field, Reason: gwapiv1.RouteReasonInvalidKind, Unresolved: true,
			Message: fmt.Sprintf("%s cannot be resolved: no module %s handles that kind in this build", what, id)}
	}
	return t.extensionConfig(rc, extensionUse{gk: schema.GroupKind{Group: group, Kind: kind}, namespace: rc.st.key.Namespace,
		name: string(ref.Name), field: field, what: what}, env)
}

// extensionUse is one use of an extension object by a rule: an ExtensionRef of the route, or an
// object that targets the route's Gateway (gatewayfilters.go). namespace is the object's, which
// is also the namespace its own references are judged from.
type extensionUse struct {
	gk              schema.GroupKind
	namespace, name string
	field, what     string
}

// extensionConfig is the module config of one extension object used by a rule (its module is
// registered).
func (t *session) extensionConfig(rc *routeContext, u extensionUse, env translation.FilterEnv) (*irv1.ModuleConfig, *translation.Failure) {
	key := rc.st.key
	group, kind, field, what := u.gk.Group, u.gk.Kind, u.field, u.what
	ref := struct{ Name string }{u.name}
	id := core.ExtensionModuleID(group, kind)
	info, _ := t.opts.Registry.Lookup(id)
	unresolved := func(reason gwapiv1.RouteConditionReason, format string, args ...any) *translation.Failure {
		return &translation.Failure{Field: field, Reason: reason, Unresolved: true, Message: what + ": " + fmt.Sprintf(format, args...)}
	}
	// One fresh instance: its declarations first, then the config decoded into it.
	mod := info.New()
	var api core.ExtensionAPI
	if ek, ok := mod.(core.ExtensionKind); ok {
		api = ek.ExtensionAPI()
	}
	if rk, ok := mod.(core.ExtensionRouteKinds); ok && env.Kind != "" {
		if supported, ignored := rk.ExtensionRouteKinds(); !slices.Contains(supported, env.Kind) {
			if slices.Contains(ignored, env.Kind) {
				rc.Warn(field, "%s is not enforced on %s (it applies to %s only); the rule is served without it", what, env.Kind, strings.Join(supported, ", "))
				return nil, nil
			}
			return nil, translation.Fail(field, gwapiv1.RouteReasonUnsupportedValue, "%s: %s filters are not supported on %s (only on %s)", what, kind, env.Kind, strings.Join(supported, ", "))
		}
	}
	obj := t.extensionObject(u.gk, u.namespace, u.name)
	if obj == nil {
		t.unresolvedFilter(kind, key.String()+" "+field)
		if api.FailOpen {
			rc.Unresolved(field, RouteReasonFilterNotFound, "%s: %s %s/%s does not exist (the rule is served without the filter)", what, kind, u.namespace, ref.Name)
			return nil, nil
		}
		return nil, unresolved(RouteReasonFilterNotFound, "%s %s/%s does not exist", kind, u.namespace, ref.Name)
	}
	spec, err := specOf(obj)
	if err != nil {
		return nil, unresolved(gwapiv1.RouteReasonUnsupportedValue, "reading its spec: %v", err)
	}
	if res, ok := t.resolver(id); ok {
		if spec, err = res.Resolve(&resolveContext{t: t, namespace: u.namespace, from: u.gk, rc: rc, field: field, what: what}, obj, spec); err != nil {
			var f *translation.Failure
			if errors.As(err, &f) {
				return nil, &translation.Failure{Field: field, Reason: f.Reason, Unresolved: true, Message: what + ": " + f.Message}
			}
			return nil, unresolved(gwapiv1.RouteReasonUnsupportedValue, "%v", err)
		}
	}
	if err := core.DecodeStrict(spec, mod); err != nil {
		return nil, unresolved(gwapiv1.RouteReasonUnsupportedValue, "invalid spec: %v", err)
	}
	if c, ok := mod.(core.ConfigChecker); ok {
		if err := c.CheckConfig(); err != nil {
			return nil, unresolved(gwapiv1.RouteReasonUnsupportedValue, "invalid spec: %v", err)
		}
	}
	if w, ok := mod.(core.ConfigWarner); ok {
		for _, msg := range w.ConfigWarnings() {
			rc.Warn(field, "%s: %s", what, msg)
		}
	}
	return &irv1.ModuleConfig{Id: string(id), Json: spec}, nil
}

// extensionObject finds an object an ExtensionRef names, indexing its kind on first use.
func (t *session) extensionObject(gk schema.GroupKind, ns, name string) translation.Object {
	idx, ok := t.extIndex[gk]
	if !ok {
		idx = map[types.NamespacedName]translation.Object{}
		for _, o := range t.store.Objects[gk] {
			idx[nn(o.GetNamespace(), o.GetName())] = o
		}
		t.extIndex[gk] = idx
	}
	return idx[nn(ns, name)]
}

// resolver returns the translate.filter.ext.* resolver of ExtensionRef module id, if any.
func (t *session) resolver(id core.ModuleID) (translation.ExtensionResolver, bool) {
	info, ok := t.opts.Registry.Lookup(translation.ExtensionResolverID(id))
	if !ok {
		return nil, false
	}
	r, ok := info.New().(translation.ExtensionResolver)
	return r, ok
}

// specOf returns the JSON of an object's .spec ({} when it has none), typed or unstructured
// alike: both marshal to the object's JSON form, with sorted map keys, so the config (and the
// snapshot version) is deterministic.
func specOf(obj translation.Object) (json.RawMessage, error) {
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var o struct {
		Spec json.RawMessage `json:"spec"`
	}
	if err := json.Unmarshal(data, &o); err != nil {
		return nil, err
	}
	if len(o.Spec) == 0 || string(o.Spec) == "null" {
		return json.RawMessage("{}"), nil
	}
	return o.Spec, nil
}
