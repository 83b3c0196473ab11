package provision

import (
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/client"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// DedicatedRenderer is the seam the dedicated deployment mode plugs into. For a Gateway of ours
// it decides whether the Gateway runs on a proxy pool of its own (handled) and, if so, renders
// the objects that pool consists of: Deployment, Service, ServiceAccount, HPA, PDB. The
// reconciler applies them exactly as it applies the shared mode's VIP Service and identity
// ServiceAccount: owned by the Gateway (owner reference), labelled as ours, drift repaired,
// a foreign object of the same name reported as a condition and never overwritten, objects no
// longer rendered pruned.
//
// Objects must carry Namespace (the Gateway's), Name and their typed Go value (e.g.
// *appsv1.Deployment, any kind client-go's scheme knows); their labels and annotations should be
// InfrastructureMetadata(gw, component) (GEP-1867 metadata over the reserved GEP-1762 labels),
// which also marks them as the controller's. The reconciler sets the owner reference. Kinds
// other than Service and ServiceAccount are not cached: the reconciler reads them with a get
// (the controller needs get on them) before it creates or applies, and re-applies one only when
// what the renderer returns for it changes (a watch on the kind, feeding the controller's
// change notifications, would add drift repair for it). handled=false means "not dedicated":
// the shared mode provisions the Gateway. A non-nil err with handled=true means the Gateway
// asked for dedicated mode but its parameters are unusable; nothing is provisioned for it (what
// was is pruned) and the error is logged; the translator reports the condition
// (Accepted=False InvalidParameters) from the same parameters.
type DedicatedRenderer interface {
	//
	// sockets are the Gateway's listener sockets (its own listeners, its ListenerSets', the UDP
	// sockets of HTTP/3), each a Service port whose targetPort is the same number.
	Objects(gw *gwapiv1.Gateway, class *gwapiv1.GatewayClass, sockets []PortKey) (objs []client.Object, handled bool, err error)
}

var (
	dedicatedMu       sync.RWMutex
	dedicatedRenderer DedicatedRenderer
)

// RegisterDedicated installs the dedicated mode's renderer; call it from an init function. A
// second registration panics: one binary has one dedicated mode.
func RegisterDedicated(r DedicatedRenderer) {
	dedicatedMu.Lock()
	defer dedicatedMu.Unlock()
	if r == nil {
		panic("provision: RegisterDedicated(nil)")
	}
	if dedicatedRenderer != nil {
		panic("provision: a dedicated renderer is already registered")
	}
	dedicatedRenderer = r
}

// dedicated returns the registered renderer, or nil when the binary has no dedicated mode.
func dedicated() DedicatedRenderer {
	dedicatedMu.RLock()
	defer dedicatedMu.RUnlock()
	return dedicatedRenderer
}
