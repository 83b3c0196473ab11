// Package translate is the controller half of route.http: it turns HTTPRoute rules into IR
// routes for the translator's core passes. It registers module "translate.route.http".
//
// Each match of each rule becomes one IR route whose match is a route.http config
// (httproute.Match) and whose filters are filter.http.* configs. Validation the API server's CEL
// would have done happens here too, because standalone mode reads YAML that never went through
// an API server: a match that cannot be built (a bad RE2 regex, a malformed path) drops its
// rule; a filter that cannot run as written fails its rule, which then answers 500 rather than
// serving without the filter.
//
// Precedence (Gateway API HTTPRoute, across all rules of all routes in a virtual host):
//
//  1. Exact path, then RegularExpression path, then PathPrefix path. The spec leaves regex
//     placement to the implementation; we put it between the two so a regex is not shadowed by
//     a PathPrefix "/" catch-all, which is the common way a regex route is combined with others.
//  2. Longer path value (characters) first, within the same path type.
//  3. A method match before none.
//  4. More header matches first, then more query parameter matches first.
//  5. Ties: the core's oldest route, "<namespace>/<name>", rule index, match index.
package translate

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/core"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

// ModuleID is the translator module this package registers.
const ModuleID = "translate.route.http"

func init() { core.RegisterModule(Kind{}) }

// Kind is the HTTPRoute route kind.
type Kind struct{}

var _ translation.RouteKind = Kind{}

// CoxswainModule implements core.Module.
func (Kind) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: ModuleID, New: func() core.Module { return Kind{} }}
}

// API is gateway.networking.k8s.io/v1 HTTPRoute; files may also say v1beta1, the same schema.
func (Kind) API() translation.RouteAPI {
	api := translation.NewAPI(schema.GroupVersionKind{Group: gwapiv1.GroupName, Version: "v1", Kind: "HTTPRoute"}, "httproutes", gwapiv1.Install,
		func(r *gwapiv1.HTTPRoute) *gwapiv1.RouteStatus { return &r.Status.RouteStatus }, defaultRoute)
	api.ReadVersions = []string{"v1beta1"}
	return api
}

// Protocols are HTTP and HTTPS (terminated) listeners.
func (Kind) Protocols() []gwapiv1.ProtocolType {
	return []gwapiv1.ProtocolType{gwapiv1.HTTPProtocolType, gwapiv1.HTTPSProtocolType}
}

// Route wraps one HTTPRoute.
func (Kind) Route(o translation.Object) (translation.Route, bool) {
	r, ok := o.(*gwapiv1.HTTPRoute)
	return route{r}, ok
}

type route struct{ r *gwapiv1.HTTPRoute }

var _ translation.Route = route{}

func (r route) Object() translation.Object                             { return r.r }
func (r route) ParentRefs() []gwapiv1.ParentReference                  { return r.r.Spec.ParentRefs }
func (r route) Hostnames() []gwapiv1.Hostname                          { return r.r.Spec.Hostnames }
func (r route) Build(rc translation.RouteContext) []*translation.Entry { return build(rc, r.r) }
