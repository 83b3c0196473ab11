package translator

import (
	"context"
	"errors"
	"sort"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwapiv1b1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/coxswain-labs/coxswain/controller/provision/dedicated"
	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	infrav1a1 "github.com/coxswain-labs/coxswain/modules/api/infrastructure/v1alpha1"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

// session is the state of one Translate call. The passes run in order: index the store,
// GatewayClasses, Gateways and their listeners, routes (attachment and rules), then assembly of
// the snapshot and the status.
type session struct {
	ctx   context.Context
	store *Store
	opts  Options
	now   metav1.Time

	kinds []translation.RouteKind // sorted by module ID
	// filterKinds are the translate.filter.* modules by filter type.
	filterKinds map[gwapiv1.HTTPRouteFilterType]translation.FilterTranslator
	// extensionErrs are the filter modules that cannot be used as declared: a filter.ext.* one
	// without (or with a wrong) ExtensionAPI, a second translator of one filter type.
	extensionErrs []error
	// extIndex indexes the objects of extension kinds ExtensionRefs name, built on first use.
	extIndex map[schema.GroupKind]map[types.NamespacedName]translation.Object

	namespaces map[string]map[string]string
	services   map[types.NamespacedName]*corev1.Service
	slices     map[types.NamespacedName][]*discoveryv1.EndpointSlice // by namespace/service
	secrets    map[types.NamespacedName]*corev1.Secret
	grants     map[string][]*gwapiv1b1.ReferenceGrant // by namespace
	// configMaps and trustBundles index the CA sources, built on first use (frontendtls.go).
	configMaps   map[types.NamespacedName]*corev1.ConfigMap
	trustBundles map[string]*certificatesv1.ClusterTrustBundle

	classes map[string]*gwapiv1.GatewayClass // ours, by name
	// classRejected says why one of our classes is not accepted (a parametersRef we cannot use).
	classRejected map[string]string
	gateways      []*gatewayState // ours, oldest first
	gwByKey       map[types.NamespacedName]*gatewayState
	// listenerSets are the ListenerSets of our Gateways (listenerset.go), by Gateway and
	// precedence; lsByKey indexes them, listenerSetsByGateway is the store's by parent.
	listenerSets          []*listenerSetState
	lsByKey               map[types.NamespacedName]*listenerSetState
	listenerSetsByGateway map[types.NamespacedName][]*gwapiv1.ListenerSet
	routes                []*routeState
	// backendPolicies are the CoxswainBackendPolicies, oldest first; servicePolicies the one
	// that applies to each Service.
	backendPolicies []*backendPolicy
	servicePolicies map[types.NamespacedName]*backendPolicy
	// tlsPolicies are the BackendTLSPolicies, oldest first; tlsTargets the one that applies to
	// each target (backendtls.go).
	tlsPolicies []*backendTLSPolicy
	tlsTargets  map[tlsTarget]*backendTLSPolicy
	// clientTrafficPolicies are the ClientTrafficPolicies, oldest first.
	clientTrafficPolicies []*clientTrafficPolicy
	// gatewayFilters are the extension objects that target each Gateway (GatewayFilterKinds),
	// gatewayFilterList all that target any, oldest first.
	gatewayFilters    map[types.NamespacedName][]*gatewayFilter
	gatewayFilterList []*gatewayFilter
	// aliases maps an ExtensionAPI.Alias to its kind.
	aliases map[schema.GroupKind]string

	clusters map[string]*irv1.Cluster
	// filterClusters are the clusters filter objects call (ResolveContext.Backend).
	filterClusters map[string]bool
	secretsOut     map[string]*irv1.Secret
	// acmeOrders are the ACME certificates wanted, by issuer key and hostname (Result.ACME).
	acmeOrders map[string]*ACMEOrder
	problems   map[string]*Problem
	warnings   map[string]*Problem
	// documents are the remote documents asked for so far (resolveContext.Document).
	documents map[string]document
	// unresolvedFilters are the ExtensionRefs to missing objects, by kind, each once (Build runs
	// once per listener): Result.UnresolvedFilters.
	unresolvedFilters map[string]map[string]bool

	// memo holds the records of Build calls an Incremental reuses (nil in Translate); rec is the
	// record of the Build call under way, if any (incremental.go).
	memo *memoSet
	rec  *buildRecord
	// sealer seals with the hashes of the previous snapshot's routes and clusters (seal.go).
	sealer *sealer
	// vhosts are the virtual hosts of the previous snapshot an Incremental may share (vhosts.go).
	vhosts *vhostMemo
	// attachRec records the attachment of the route under way, placing that of its parentRef
	// under way; attachNotReplayable says the attachment cannot be replayed (attachmemo.go).
	attachRec           *attachRecord
	placing             *parentRecord
	attachNotReplayable bool
	listenersByID       []*listenerState // by placeID (replayAttach)
	// lastReplayed is the recorded cluster replay saw last (replay).
	lastReplayed *irv1.Cluster
	// attachSlab is the chunk newAttachment allocates from.
	attachSlab []attachment
	// ages keeps the routes' age order across an Incremental's translations (ageorder.go).
	ages *ageOrder
	// attachScratch holds the listeners of the attachment being replayed (replayAttach).
	attachScratch []*listenerState
	// handOver makes an Incremental's Result.Routes from the previous one's, statusSeq is its
	// count of this translation (statuschanges.go); nil and 0 in Translate.
	handOver  *statusHandOver
	statusSeq uint64
	// uncarried are the routes of t.routes an Incremental did not carry over (for handOver).
	uncarried []*routeState
	// conflicted are the parentRefs that lost a listener to a route of an exclusive kind
	// (kindconflict.go), each once.
	conflicted []conflictedParent
	// delta is the Changes an Incremental was given, when usable (changes.go); kindLists the
	// route states of each kind this translation leaves for the next (nil in Translate).
	delta     *deltaInput
	kindLists map[schema.GroupKind]*kindList
	// routesHint is the number of attachments of each listener in the previous translation,
	// by placeID, to size the listeners' lists of routes once.
	routesHint []int32
	// kept is the kept route pass of the previous translation, and then of this one (keep.go);
	// keeping says this translation's route pass patched it, so t.routes is not made unless
	// asked for (allRoutes) and routeN counts the routes with parents; keptCurrent says the
	// states marked kept were states of the previous translation.
	kept        *keptSet
	keeping     bool
	routeN      int
	keptCurrent bool
}

func newSession(ctx context.Context, store *Store, opts Options) *session {
	if opts.ControllerName == "" {
		opts.ControllerName = DefaultControllerName
	}
	if opts.Registry == nil {
		opts.Registry = core.Freeze()
	}
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	if opts.Now != nil {
		now = opts.Now()
	}
	if store == nil {
		store = &Store{}
	}
	exts, extErrs := opts.Registry.Extensions()
	aliases := map[schema.GroupKind]string{}
	for _, api := range exts {
		if api.Alias != "" {
			aliases[schema.GroupKind{Group: api.Group, Kind: api.Alias}] = api.Kind
		}
	}
	filterKinds, dupErrs := filterTranslators(opts.Registry)
	kinds := translation.RouteKinds(opts.Registry)
	store = withImplicitParents(store, kinds, opts)
	return &session{
		extensionErrs: append(extErrs, dupErrs...),
		ctx:           ctx, store: store, opts: opts, now: now,
		kinds:             kinds,
		filterKinds:       filterKinds,
		aliases:           aliases,
		extIndex:          map[schema.GroupKind]map[types.NamespacedName]translation.Object{},
		gwByKey:           map[types.NamespacedName]*gatewayState{},
		lsByKey:           map[types.NamespacedName]*listenerSetState{},
		clusters:          map[string]*irv1.Cluster{},
		filterClusters:    map[string]bool{},
		secretsOut:        map[string]*irv1.Secret{},
		acmeOrders:        map[string]*ACMEOrder{},
		problems:          map[string]*Problem{},
		warnings:          map[string]*Problem{},
		documents:         map[string]document{},
		unresolvedFilters: map[string]map[string]bool{},
	}
}

func (t *session) run() *Result {
	if len(t.kinds) == 0 {
		// Every listener would be UnsupportedProtocol and every route ignored: say why once.
		t.problem("Registry", "", "", "", "NoRouteKinds",
			"no "+translation.RouteKindNamespace+".* module in this build; import github.com/coxswain-labs/coxswain/modules/httproute/translate")
	}
	for _, err := range t.extensionErrs {
		// A distribution whose filter modules do not fit together says so once, as a Problem.
		t.problem("Registry", "", "", "", "InvalidFilterModule", err.Error())
	}
	t.index()
	t.translateBackendPolicies()
	t.translateBackendTLSPolicies()
	t.translateClasses()
	t.translateGateways()
	t.translateClientTrafficPolicies()
	t.translateGatewayFilters()
	t.translateRoutes()
	t.hostnameKindConflicts()
	t.yieldToGatewayAPI()
	res := t.result()
	dropImplicitStatus(res)
	return res
}

// index builds the lookup maps the passes need.
func (t *session) index() {
	s := t.store
	t.namespaces = map[string]map[string]string{}
	for _, ns := range s.Namespaces {
		t.namespaces[ns.Name] = ns.Labels
	}
	t.services = map[types.NamespacedName]*corev1.Service{}
	for _, svc := range s.Services {
		t.services[nn(svc.Namespace, svc.Name)] = svc
	}
	t.slices = map[types.NamespacedName][]*discoveryv1.EndpointSlice{}
	for _, es := range s.EndpointSlices {
		svc := es.Labels[discoveryv1.LabelServiceName]
		if svc == "" {
			continue
		}
		k := nn(es.Namespace, svc)
		t.slices[k] = append(t.slices[k], es)
	}
	t.secrets = map[types.NamespacedName]*corev1.Secret{}
	for _, sec := range s.Secrets {
		t.secrets[nn(sec.Namespace, sec.Name)] = sec
	}
	t.grants = map[string][]*gwapiv1b1.ReferenceGrant{}
	for _, g := range s.ReferenceGrants {
		t.grants[g.Namespace] = append(t.grants[g.Namespace], g)
	}
}

// namespaceLabels returns the labels of ns. A namespace missing from the store still carries the
// label Kubernetes puts on every namespace, so selectors on it keep working in standalone mode.
func (t *session) namespaceLabels(ns string) map[string]string {
	out := map[string]string{corev1.LabelMetadataName: ns}
	for k, v := range t.namespaces[ns] {
		out[k] = v
	}
	return out
}

func (t *session) translateClasses() {
	t.classes = map[string]*gwapiv1.GatewayClass{}
	t.classRejected = map[string]string{}
	for _, gc := range t.store.GatewayClasses {
		if string(gc.Spec.ControllerName) != t.opts.ControllerName {
			continue
		}
		t.classes[gc.Name] = gc
		if _, err := dedicated.ResolveClass(gc, t.gatewayParameters); err != nil {
			t.classRejected[gc.Name] = err.Error()
			field, msg := paramsProblem(err)
			t.problem("GatewayClass", "", gc.Name, field, string(gwapiv1.GatewayClassReasonInvalidParameters), msg)
		}
	}
}

// paramsProblem splits a parametersRef error into the field and what is wrong with it.
func paramsProblem(err error) (field, msg string) {
	if pe, ok := errors.AsType[*dedicated.ParamsError](err); ok {
		return pe.Field, pe.Message
	}
	return "parametersRef", err.Error()
}

// gatewayParameters finds a CoxswainGatewayParameters of the store.
func (t *session) gatewayParameters(ns, name string) (*infrav1a1.CoxswainGatewayParameters, bool) {
	for _, p := range t.store.GatewayParameters {
		if p.Namespace == ns && p.Name == name {
			return p, true
		}
	}
	return nil, false
}

// fieldProblem is problem for a message that, being a status condition's too, starts with the
// path it is about (field itself or a path under it, then ": "): that path becomes the
// problem's field and leaves the message, which would otherwise name it twice.
func (t *session) fieldProblem(kind, ns, name, field, reason, msg string) {
	field, msg = splitFieldPrefix(field, msg)
	t.problem(kind, ns, name, field, reason, msg)
}

// splitFieldPrefix splits "spec.x[0].y: what" into its path and the rest when the path is
// field or under it; otherwise it returns field and msg unchanged.
func splitFieldPrefix(field, msg string) (string, string) {
	path, rest, ok := strings.Cut(msg, ": ")
	if !ok || field == "" || !strings.HasPrefix(path, field) || strings.ContainsAny(path, " \"") {
		return field, msg
	}
	if tail := path[len(field):]; tail != "" && tail[0] != '.' && tail[0] != '[' {
		return field, msg
	}
	return path, rest
}

func (t *session) problem(kind, ns, name, field, reason, msg string) {
	p := &Problem{Kind: kind, Namespace: ns, Name: name, Field: field, Reason: reason, Message: msg}
	t.problems[p.Error()] = p
}

func sortProblems(ps map[string]*Problem) []*Problem {
	out := make([]*Problem, 0, len(ps))
	for _, p := range ps {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		if a.Field != b.Field {
			return a.Field < b.Field
		}
		return a.Message < b.Message
	})
	return out
}

func nn(ns, name string) types.NamespacedName { return types.NamespacedName{Namespace: ns, Name: name} }

// olderFirst orders objects the way Gateway API breaks ties: oldest creationTimestamp, then
// "<namespace>/<name>".
func olderFirst(a, b metav1.Object) bool {
	ta, tb := a.GetCreationTimestamp(), b.GetCreationTimestamp()
	if !ta.Equal(&tb) {
		return ta.Before(&tb)
	}
	if a.GetNamespace() != b.GetNamespace() {
		return a.GetNamespace() < b.GetNamespace()
	}
	return a.GetName() < b.GetName()
}
