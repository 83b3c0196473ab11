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
// Objects must carry Namespace, Name and their GVK-typed Go value (e.g. *appsv1.Deployment);
// labels from Labels(gw, class) are added by the reconciler, so a renderer need not add them
// but may. handled=false means "not dedicated": the shared mode provisions the Gateway. A
// non-nil err with handled=true means the Gateway asked for dedicated mode but its parameters
// are unusable; the error becomes the Gateway's condition (use *ConditionError to choose the
// type and reason, e.g. Accepted=False InvalidParameters) and nothing is provisioned for it.
type DedicatedRenderer interface {
	Objects(gw *gwapiv1.Gateway, class *gwapiv1.GatewayClass) (objs []client.Object, handled bool, err error)
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

// ServiceTypeSource tells the shared mode which Service type a GatewayClass asks for through its
// parametersRef (CoxswainGatewayParameters spec.service.type). The dedicated mode, which owns
// that CRD, implements it; without one the controller flag --gateway-service-type decides.
// ok=false: the class sets no type.
type ServiceTypeSource interface {
	ServiceType(class *gwapiv1.GatewayClass) (serviceType string, ok bool)
}

var serviceTypeSource ServiceTypeSource

// RegisterServiceTypeSource installs the per-GatewayClass Service type lookup; call it from init.
func RegisterServiceTypeSource(s ServiceTypeSource) {
	dedicatedMu.Lock()
	defer dedicatedMu.Unlock()
	if serviceTypeSource != nil {
		panic("provision: a service type source is already registered")
	}
	serviceTypeSource = s
}

func classServiceType(class *gwapiv1.GatewayClass) (string, bool) {
	dedicatedMu.RLock()
	s := serviceTypeSource
	dedicatedMu.RUnlock()
	if s == nil || class == nil {
		return "", false
	}
	return s.ServiceType(class)
}

// ConditionError is an error a renderer returns to set a specific Gateway condition.
type ConditionError struct {
	Type, Reason, Message string
}

func (e *ConditionError) Error() string { return e.Message }
