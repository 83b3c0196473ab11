package translator

import (
	"context"
	"fmt"
	"net/netip"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

// DefaultControllerName is the GatewayClass spec.controllerName Coxswain answers to by default.
const DefaultControllerName = "coxswain-labs.dev/gateway-controller"

// Options tune one translation.
type Options struct {
	// ControllerName selects our GatewayClasses; DefaultControllerName when empty.
	ControllerName string
	// AllowLoopbackEndpoints accepts 127.0.0.0/8 and ::1 endpoint addresses. Standalone mode sets it;
	// in a cluster a loopback endpoint would point a proxy at itself.
	AllowLoopbackEndpoints bool
	// Now stamps condition lastTransitionTime; time.Now when nil. Golden tests fix it so the
	// output is stable.
	Now func() metav1.Time
	// Registry holds the translate.route.* modules; core.Freeze() when nil.
	Registry *core.Registry
	// GatewayAddresses are IP addresses the controller gave Gateways that ask for one (no
	// spec.addresses, or an IPAddress entry without a value; controller --gateway-address-pool).
	// Such a Gateway's listeners bind its address (beside any it names) and its status publishes
	// it, exactly as if the spec had named it.
	GatewayAddresses map[types.NamespacedName]netip.Addr
	// AssignsAddresses says GatewayAddresses come from a pool: a Gateway that asks for an address
	// and got none is not programmed (AddressNotAssigned) rather than bound on every address.
	AssignsAddresses bool
	// Routability reports status.addresses[].routability on every address and the
	// AddressesAssigned condition (GEP-5093, GatewayAddressRoutability): set when the Gateway
	// CRDs serve the field, since an API server without it would drop it from every write.
	Routability bool
	// StatusAddresses are the controller's --status-address values: with Routability, a Gateway
	// bound on every address reports them itself, with the routability its spec asked for.
	StatusAddresses []gwapiv1.GatewayStatusAddress
	// Provisioned are the Gateways the shared proxy pool serves behind VIP Services the
	// controller provisioned (controller/provision): their listeners bind internal ports on every
	// address and their status publishes the Service's addresses. Other Gateways are translated
	// as the options above say.
	Provisioned map[types.NamespacedName]*Provisioned
	// Documents are the remote documents resolvers read (JWKS); nil means none can be fetched
	// in this process, and a resolver that needs one reports it.
	Documents translation.Documents
	// SessionKey is the secret session persistence cookies are keyed with: each cluster's key is
	// HMAC-SHA256(SessionKey, cluster name), so that a token neither shows its endpoint nor can
	// be forged. Processes whose proxies must honour each other's cookies need the same one: the
	// controller derives it from its discovery CA, `coxswain serve` reads --session-key-file or
	// makes a random one. Left empty (tests), the keys are computable by anyone.
	SessionKey []byte
	// KindSettings are settings of route kinds that the core hands to them
	// (translation.ImplicitWorld.Settings): "ingress.http-address", "ingress.https-address".
	KindSettings map[string]string
	// ACME is the process's ACME client (controller/acme): the certificates it obtained for
	// Gateways that ask for them, and the challenges it answers. nil: none runs here, and such
	// listeners stay Programmed=False (Pending).
	ACME ACMESource
}

// Result is one translation: the snapshot every proxy should run and the status the controller
// should write.
type Result struct {
	// Snapshot is sorted and sealed: the same Store always gives the same Version.
	Snapshot *irv1.Snapshot
	// Status for objects this controller owns. A route's status holds only the RouteParentStatus
	// entries whose controllerName is ours: the writer merges them with other controllers' entries.
	GatewayClasses map[types.NamespacedName]*gwapiv1.GatewayClassStatus
	Gateways       map[types.NamespacedName]*gwapiv1.GatewayStatus
	// ListenerSets holds the status of the ListenerSets whose parent is one of our Gateways.
	ListenerSets map[types.NamespacedName]*gwapiv1.ListenerSetStatus
	// Routes holds the parent statuses of routes of every kind (read-only: an Incremental's
	// Results share them, routestatuses.go).
	Routes RouteStatuses
	// Policies holds the ancestor statuses of policies of every kind (CoxswainBackendPolicy):
	// only entries whose controllerName is ours, which the writer merges with other controllers'.
	Policies map[PolicyKey]*gwapiv1.PolicyStatus
	// Problems lists every invalid thing found, sorted; each also shows as a condition.
	Problems []*Problem
	// Warnings lists what was accepted but not served as written (reason ReasonWarning),
	// sorted; each also shows in its route's ResolvedRefs message. They are not errors.
	Warnings []*Problem
	// UnresolvedFilters counts, by kind, the ExtensionRefs that name an object that does not
	// exist (the controller's coxswain_filter_unresolved_total).
	UnresolvedFilters map[string]int
	// ACME are the certificates ACME listeners want, sorted by hostname: what the ACME client
	// should obtain and keep renewed.
	ACME []*ACMEOrder

	// changes are the route statuses this Result changed against the previous one of its
	// Incremental (RouteStatusChanges); nil from Translate.
	changes *routeChanges
}

// RouteKey names one route object of any kind.
type RouteKey struct {
	Group     string
	Kind      string
	Namespace string
	Name      string
}

func (k RouteKey) String() string { return k.Kind + " " + k.Namespace + "/" + k.Name }

// Problem is one invalid thing in the input: which object, which field, and the condition reason
// it shows up as in status.
// ReasonWarning is the Reason of a Problem in Result.Warnings.
const ReasonWarning = "Warning"

type Problem struct {
	Kind      string
	Namespace string
	Name      string
	// Field is the path inside the object, e.g. "spec.rules[0].matches[1].path.value".
	Field string
	// Reason is the condition reason the problem is reported with.
	Reason  string
	Message string
}

func (p *Problem) Error() string {
	obj := p.Kind + " " + p.Name
	if p.Namespace != "" {
		obj = p.Kind + " " + p.Namespace + "/" + p.Name
	}
	if p.Field == "" {
		return fmt.Sprintf("%s: %s (%s)", obj, p.Message, p.Reason)
	}
	return fmt.Sprintf("%s: %s: %s (%s)", obj, p.Field, p.Message, p.Reason)
}

// Translate compiles the store into a snapshot and the status to write. It never fails: invalid
// objects become Problems and False conditions, and everything valid ships.
func Translate(ctx context.Context, store *Store, opts Options) *Result {
	t := newSession(ctx, store, opts)
	return t.run()
}
