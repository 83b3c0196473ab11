package controller

import (
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	policyv1a1 "github.com/coxswain-labs/coxswain/modules/api/policy/v1alpha1"

	"github.com/coxswain-labs/coxswain/controller/translator"
)

// problemEvents records a Warning Event on the object of every translation problem, once while
// the problem lasts: status conditions say what is wrong now, Events leave a trail `kubectl
// describe` and /api/v1/events show. Only the leader records (one per leadership term).
type problemEvents struct {
	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder
	log         *zap.Logger
	seen        map[string]bool
}

func newProblemEvents(kube kubernetes.Interface, controllerName string, log *zap.Logger) *problemEvents {
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	return &problemEvents{broadcaster: b, log: log, seen: map[string]bool{},
		recorder: b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: controllerName})}
}

// record emits the problems of res that were not there at the previous call.
func (pe *problemEvents) record(store *translator.Store, res *translator.Result) {
	now := make(map[string]bool, len(res.Problems))
	for _, p := range res.Problems {
		key := p.Error()
		now[key] = true
		if pe.seen[key] {
			continue
		}
		ref := objectReference(store, p.Kind, p.Namespace, p.Name)
		if ref == nil {
			continue // about no object (the build, the snapshot): the log has it
		}
		msg := p.Message
		if p.Field != "" {
			msg = p.Field + ": " + msg
		}
		pe.recorder.Event(ref, corev1.EventTypeWarning, p.Reason, msg)
	}
	pe.seen = now
}

func (pe *problemEvents) shutdown() { pe.broadcaster.Shutdown() }

// objectReference finds the object a problem is about in the store; nil when it is none.
func objectReference(store *translator.Store, kind, ns, name string) *corev1.ObjectReference {
	gw := gwapiv1.GroupVersion.String()
	ref := func(apiVersion string, uid, rv string) *corev1.ObjectReference {
		return &corev1.ObjectReference{APIVersion: apiVersion, Kind: kind, Namespace: ns, Name: name, UID: types.UID(uid), ResourceVersion: rv}
	}
	switch kind {
	case "GatewayClass":
		for _, o := range store.GatewayClasses {
			if o.Name == name {
				return ref(gw, string(o.UID), o.ResourceVersion)
			}
		}
	case "Gateway":
		for _, o := range store.Gateways {
			if o.Namespace == ns && o.Name == name {
				return ref(gw, string(o.UID), o.ResourceVersion)
			}
		}
	case "ListenerSet":
		for _, o := range store.ListenerSets {
			if o.Namespace == ns && o.Name == name {
				return ref(gw, string(o.UID), o.ResourceVersion)
			}
		}
	case "BackendTLSPolicy":
		for _, o := range store.BackendTLSPolicies {
			if o.Namespace == ns && o.Name == name {
				return ref(gw, string(o.UID), o.ResourceVersion)
			}
		}
	case "CoxswainBackendPolicy":
		for _, o := range store.BackendPolicies {
			if o.Namespace == ns && o.Name == name {
				return ref(policyv1a1.SchemeGroupVersion.String(), string(o.UID), o.ResourceVersion)
			}
		}
	case "ClientTrafficPolicy":
		for _, o := range store.ClientTrafficPolicies {
			if o.Namespace == ns && o.Name == name {
				return ref(policyv1a1.SchemeGroupVersion.String(), string(o.UID), o.ResourceVersion)
			}
		}
	}
	for gk, objs := range store.Objects {
		if gk.Kind != kind {
			continue
		}
		for _, o := range objs {
			if o.GetNamespace() == ns && o.GetName() == name {
				return ref(apiVersionOf(gk, o.GetObjectKind().GroupVersionKind()), string(o.GetUID()), o.GetResourceVersion())
			}
		}
	}
	return nil
}

// apiVersionOf is the object's own apiVersion, else its group's v1 (typed informer objects come
// without TypeMeta; every route kind we serve is v1 or has a v1 alias).
func apiVersionOf(gk schema.GroupKind, gvk schema.GroupVersionKind) string {
	if gvk.Version != "" {
		return gvk.GroupVersion().String()
	}
	return schema.GroupVersion{Group: gk.Group, Version: "v1"}.String()
}
