package translator

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// listenerSetStatuses is the status of every ListenerSet of our Gateways: Accepted and Programmed
// for the set, and per listener the conditions a Gateway listener has. Programmed=True here means
// translated into the snapshot; the status writer holds it back until the data plane has bound
// the listeners and acknowledged this generation, as for a Gateway.
func (t *session) listenerSetStatuses() map[types.NamespacedName]*gwapiv1.ListenerSetStatus {
	out := map[types.NamespacedName]*gwapiv1.ListenerSetStatus{}
	for _, s := range t.listenerSets {
		out[s.key] = t.listenerSetStatus(s)
	}
	return out
}

func (t *session) listenerSetStatus(s *listenerSetState) *gwapiv1.ListenerSetStatus {
	gen := s.ls.Generation
	st := &gwapiv1.ListenerSetStatus{}
	programmed := 0
	for _, l := range s.listeners {
		st.Listeners = append(st.Listeners, gwapiv1.ListenerEntryStatus(t.listenerStatus(l)))
		if l.programmed() {
			programmed++
		}
	}
	prog := condState{ok: true, reason: string(gwapiv1.ListenerSetReasonProgrammed), msg: "ListenerSet is translated into the snapshot"}
	switch {
	case !s.accepted.ok:
		// NotAllowed, ParentNotAccepted and ListenersNotValid say why for both conditions.
		prog = condState{reason: s.accepted.reason, msg: s.accepted.msg}
	case s.gw.addrMsg != "":
		prog = condState{reason: string(s.gw.addrReason), msg: "the Gateway is not programmed: " + s.gw.addrMsg}
	case programmed == 0:
		prog = condState{reason: string(gwapiv1.ListenerSetReasonInvalid), msg: "no listener is programmed"}
	}
	st.Conditions = []metav1.Condition{
		t.cond(string(gwapiv1.ListenerSetConditionAccepted), s.accepted.ok, s.accepted.reason, s.accepted.msg, gen),
		t.cond(string(gwapiv1.ListenerSetConditionProgrammed), prog.ok, prog.reason, prog.msg, gen),
	}
	return st
}

// attachedListenerSets is the Gateway's status.attachedListenerSets: the ListenerSets it admits
// that are accepted. It is left unset on a Gateway no ListenerSet names and that does not say
// which it admits, so such a Gateway's status stays as it was before ListenerSets existed.
func (t *session) attachedListenerSets(g *gatewayState) *int32 {
	var n int32
	named := false
	for _, s := range t.listenerSets {
		if s.gw != g {
			continue
		}
		named = true
		if s.allowed && s.accepted.ok {
			n++
		}
	}
	if !named && g.gw.Spec.AllowedListeners == nil {
		return nil
	}
	return &n
}

// listenerSetGenerations are the snapshot entries of Gateway g's ListenerSets that have a listener
// in it: their generations, for the bind-and-acknowledge gate (ListenerSetSourceKind).
func (t *session) listenerSetGenerations(g *gatewayState) []*irv1.GatewayGeneration {
	var out []*irv1.GatewayGeneration
	for _, s := range t.listenerSets {
		if s.gw != g || !s.accepted.ok {
			continue
		}
		for _, l := range s.listeners {
			if l.programmed() {
				out = append(out, &irv1.GatewayGeneration{
					Namespace: s.key.Namespace, Name: ListenerSetGatewayName(s.key.Name), Generation: s.ls.Generation,
				})
				break
			}
		}
	}
	return out
}
