package translator

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// RouteKindNamespace is the module namespace of route-kind translators.
const RouteKindNamespace = "translate.route"

// RouteKind is the controller half of a route kind, registered as module
// "translate.route.<name>". It lists its objects and translates one object's rules; the core
// passes do everything that is the same for every kind (see doc.go).
type RouteKind interface {
	core.Module
	// GroupKind is the route resource, as listed in allowedRoutes.kinds and supportedKinds.
	GroupKind() gwapiv1.RouteGroupKind
	// Protocols are the listener protocols this kind attaches to.
	Protocols() []gwapiv1.ProtocolType
	// Routes returns this kind's objects in the store.
	Routes(s *Store) []Route
}

// ExclusiveKind is optionally implemented by route kinds whose routes have no matches (TCPRoute,
// TLSRoute, UDPRoute): the first route of a virtual host (the oldest, then by namespace/name)
// takes all of its traffic. The core leaves the others out of the snapshot, keeps them Accepted
// (they are attached, and count in attachedRoutes, as the conformance suite expects) and adds a
// Conflicted condition naming the route that wins.
type ExclusiveKind interface {
	RouteKind
	Exclusive() bool
}

// ClusterKind is optionally implemented by route kinds whose backends are not HTTP servers. The
// clusters their backendRefs resolve to carry this protocol and a name of their own
// ("<namespace>/<service>:<port>/tcp"), so that an HTTPRoute and a TCPRoute to the same Service
// port do not share a cluster; a UDP cluster uses the Service port declared with protocol UDP.
type ClusterKind interface {
	RouteKind
	ClusterProtocol() irv1.Cluster_Protocol
}

// ErrorAnswerKind is optionally implemented by route kinds whose clients do not see the engine's
// HTTP 500 as such: a rule kept as an error answer (RouteContext.FailRule) is described in the
// route's status as "it answers <ErrorAnswer>", so the message says what a client really gets
// (GRPCRoute: a gRPC status UNAVAILABLE). Kinds without it answer "500".
type ErrorAnswerKind interface {
	RouteKind
	ErrorAnswer() string
}

// Route is one route object as the core passes see it.
type Route interface {
	// Object is the route's metadata: namespace, name, generation, creation time.
	Object() metav1.Object
	ParentRefs() []gwapiv1.ParentReference
	// Hostnames the route asks for; nil for kinds that have none (TCPRoute, UDPRoute).
	Hostnames() []gwapiv1.Hostname
	// Build translates the route's rules for one listener it is attached to. It reports invalid
	// rules and references through rc, which turns them into conditions and Problems (reported
	// once even though Build runs once per attached listener). Build must be deterministic.
	Build(rc *RouteContext) []*Entry
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
