package translation

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// RouteKindNamespace is the module namespace of route kinds.
const RouteKindNamespace = "translate.route"

// Object is a Kubernetes object as the Store holds it: typed (*gwapiv1.HTTPRoute) or unstructured.
type Object interface {
	metav1.Object
	runtime.Object
}

// RouteKind is the controller half of a route kind, registered as module
// "translate.route.<name>".
type RouteKind interface {
	core.Module
	// API is the resource: how the controller watches it, the file loader reads it and the
	// status writer writes it.
	API() RouteAPI
	// Protocols are the listener protocols this kind attaches to.
	Protocols() []gwapiv1.ProtocolType
	// Route wraps one object of the kind; ok is false for an object of another Go type.
	Route(obj Object) (r Route, ok bool)
}

// RouteAPI is the API resource of a route kind. NewAPI fills it for a typed Go object.
type RouteAPI struct {
	// GVK is the version the controller watches and the Go type is.
	GVK schema.GroupVersionKind
	// Resource is the plural ("httproutes"), looked up in API discovery.
	Resource string
	// ReadVersions are further versions a manifest file may use (an older v1alpha2), decoded as
	// GVK's Go type because their schemas are the same.
	ReadVersions []string
	// AddToScheme registers the Go types of GVK and its list.
	AddToScheme func(*runtime.Scheme) error
	// New returns an empty object of the Go type.
	New func() Object
	// Default fills in what the API server's defaulting would (CRD +default markers), for
	// objects read from files.
	Default func(Object)
	// Status returns a pointer to the object's route status, for reading and writing.
	Status func(Object) *gwapiv1.RouteStatus
}

// GroupKind is the kind as allowedRoutes.kinds and supportedKinds name it.
func (a RouteAPI) GroupKind() gwapiv1.RouteGroupKind {
	g := gwapiv1.Group(a.GVK.Group)
	return gwapiv1.RouteGroupKind{Group: &g, Kind: gwapiv1.Kind(a.GVK.Kind)}
}

// NewAPI is the RouteAPI of Go type *T. status reads its RouteStatus; def defaults one object
// (nil: nothing to default).
func NewAPI[T any, P interface {
	*T
	Object
}](gvk schema.GroupVersionKind, resource string, addToScheme func(*runtime.Scheme) error,
	status func(P) *gwapiv1.RouteStatus, def func(P)) RouteAPI {
	return RouteAPI{
		GVK: gvk, Resource: resource, AddToScheme: addToScheme,
		New: func() Object { return P(new(T)) },
		Default: func(o Object) {
			if p, ok := o.(P); ok && def != nil {
				def(p)
			}
		},
		Status: func(o Object) *gwapiv1.RouteStatus {
			if p, ok := o.(P); ok {
				return status(p)
			}
			return nil
		},
	}
}

// Route is one route object as the core passes see it.
type Route interface {
	// Object is the route's metadata: namespace, name, generation, creation time.
	Object() Object
	ParentRefs() []gwapiv1.ParentReference
	// Hostnames the route asks for; nil for kinds that have none (TCPRoute, UDPRoute).
	Hostnames() []gwapiv1.Hostname
	// Build translates the route's rules for one listener it is attached to. It reports invalid
	// rules and references through rc, which turns them into conditions and Problems (reported
	// once even though Build runs once per attached listener). Build must be deterministic.
	Build(rc RouteContext) []*Entry
}

// Entry is one match of one rule, ready to be placed in the virtual hosts of the listener.
type Entry struct {
	// Rule and Match index the rule in spec.rules and the match in its matches.
	Rule, Match int
	// Precedence orders entries of the same virtual host: compared element-wise, the larger wins.
	// The core breaks ties by route age, then namespace/name, then Rule, then Match, as every
	// Gateway API route kind specifies.
	Precedence []int
	// Route is the IR route; the core sets its Name ("<kind>/<ns>/<name>/rule/<i>/match/<j>").
	// It may be shared by several virtual hosts, so nobody modifies it after Build.
	Route *irv1.Route
}

// ListenerInfo is the Gateway listener a route is being built for.
type ListenerInfo struct {
	Gateway  string // "<namespace>/<name>"
	Name     gwapiv1.SectionName
	Protocol gwapiv1.ProtocolType
	Port     uint32
	// Hostname is the listener hostname; "" for any.
	Hostname string
}

// ExclusiveKind is implemented by route kinds whose routes have no matches (TCPRoute, TLSRoute,
// UDPRoute): the first route of a virtual host (the oldest, then by namespace/name) takes all of
// its traffic. The core leaves the others out of the snapshot, keeps them Accepted (they are
// attached, and count in attachedRoutes, as the conformance suite expects) and adds a Conflicted
// condition naming the route that wins.
type ExclusiveKind interface {
	RouteKind
	Exclusive() bool
}

// ClusterKind is implemented by route kinds whose backends are not HTTP/1.1 servers. The clusters
// their backendRefs resolve to carry this protocol and a name of their own
// ("<namespace>/<service>:<port>/tcp"), so that an HTTPRoute and a TCPRoute to the same Service
// port do not share a cluster; a UDP cluster uses the Service port declared with protocol UDP.
type ClusterKind interface {
	RouteKind
	ClusterProtocol() irv1.Cluster_Protocol
}

// ErrorAnswerKind is implemented by route kinds whose clients do not see the engine's HTTP 500 as
// such: a rule kept as an error answer (RouteContext.FailRule) is described in the route's status
// as "it answers <ErrorAnswer>" (GRPCRoute: a gRPC status UNAVAILABLE). Kinds without it answer
// "500".
type ErrorAnswerKind interface {
	RouteKind
	ErrorAnswer() string
}

// HostnameExclusiveKind is implemented by a route kind that must not share a listener hostname
// with the kinds it names (GRPCRoute with HTTPRoute: GRPCRouteSpec.Hostnames). Of two routes of
// such a pair whose hostnames intersect on a listener, the oldest (then "<namespace>/<name>")
// keeps it; the other leaves that listener, with reason HostnameConflict.
type HostnameExclusiveKind interface {
	RouteKind
	HostnameExclusiveWith() []schema.GroupKind
}

// RouteReasonHostnameConflict is the reason of Accepted=False (or, when the route still serves
// other listeners of the same parentRef, Conflicted=True) on a route that loses a listener to an
// older route of a HostnameExclusiveKind pair.
const RouteReasonHostnameConflict = "HostnameConflict"

// RouteKinds returns the translate.route.* modules of reg that implement RouteKind, sorted by
// module ID.
func RouteKinds(reg *core.Registry) []RouteKind {
	var out []RouteKind
	for _, id := range reg.Namespace(RouteKindNamespace) {
		info, _ := reg.Lookup(id)
		if k, ok := info.New().(RouteKind); ok {
			out = append(out, k)
		}
	}
	return out
}
