package status

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

func lsStatus(gen int64) *gwapiv1.ListenerSetStatus {
	return &gwapiv1.ListenerSetStatus{
		Conditions: []metav1.Condition{
			cond("Accepted", "True", "Accepted", gen, t1),
			cond("Programmed", "True", "Programmed", gen, t1),
		},
		Listeners: []gwapiv1.ListenerEntryStatus{{Name: "a", AttachedRoutes: 1,
			Conditions: []metav1.Condition{cond("Accepted", "True", "Accepted", gen, t1), cond("Programmed", "True", "Programmed", gen, t1)}}},
	}
}

// A ListenerSet's Programmed waits for the data plane exactly as a Gateway's does: held (False,
// Pending) until its generation is bound and acknowledged, then True; a listener a proxy cannot
// bind is Pending with the proxy's error.
func TestListenerSetStatusGate(t *testing.T) {
	tests := []struct {
		name          string
		applied       int64
		unbound       []ListenerFailure
		set, listener string // Programmed status, reason
		setR, listenR string
	}{
		{name: "not acknowledged yet", applied: 1, set: "False", setR: "Pending", listener: "False", listenR: "Pending"},
		{name: "bound and acknowledged", applied: 2, set: "True", setR: "Programmed", listener: "True", listenR: "Programmed"},
		{name: "acknowledged, port taken", applied: 2,
			unbound: []ListenerFailure{{Listener: "a", Proxy: "p1", Address: ":80", Error: "address already in use"}},
			set:     "False", setR: "Pending", listener: "False", listenR: "Pending"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := gate{Generation: 2, Applied: tt.applied, Unbound: tt.unbound, Now: t1}
			st := listenerSetStatus(gwapiv1.ListenerSetStatus{}, lsStatus(2), g)
			c := meta.FindStatusCondition(st.Conditions, "Programmed")
			if string(c.Status) != tt.set || c.Reason != tt.setR {
				t.Errorf("ListenerSet Programmed = %s %s (%s), want %s %s", c.Status, c.Reason, c.Message, tt.set, tt.setR)
			}
			lc := meta.FindStatusCondition(st.Listeners[0].Conditions, "Programmed")
			if string(lc.Status) != tt.listener || lc.Reason != tt.listenR {
				t.Errorf("listener Programmed = %s %s (%s), want %s %s", lc.Status, lc.Reason, lc.Message, tt.listener, tt.listenR)
			}
			if a := meta.FindStatusCondition(st.Conditions, "Accepted"); a.Status != metav1.ConditionTrue {
				t.Errorf("Accepted = %s, want True whatever the data plane says", a.Status)
			}
		})
	}
}

// The data plane reports a ListenerSet's generation under its snapshot name; the writer maps it
// back to the ListenerSet, and a Gateway's to the Gateway.
func TestGateKey(t *testing.T) {
	ls := gateKey(&irv1.GatewayGeneration{Namespace: "team", Name: "ListenerSet:apps", Generation: 2})
	if ls != (Key{ListenerSetKind, types.NamespacedName{Namespace: "team", Name: "apps"}}) {
		t.Errorf("gateKey(ListenerSet) = %v", ls)
	}
	if gateNN(ls) != (types.NamespacedName{Namespace: "team", Name: "ListenerSet:apps"}) {
		t.Errorf("gateNN = %v", gateNN(ls))
	}
	gw := gateKey(&irv1.GatewayGeneration{Namespace: "infra", Name: "gw", Generation: 1})
	if gw != (Key{GatewayKind, types.NamespacedName{Namespace: "infra", Name: "gw"}}) {
		t.Errorf("gateKey(Gateway) = %v", gw)
	}
}
