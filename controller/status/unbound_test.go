package status

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// twoListeners is a translated Gateway status with listeners http and extra, all Programmed.
func twoListeners(gen int64) *gwapiv1.GatewayStatus {
	st := gwStatus(gen, "True")
	st.Listeners = append(st.Listeners, gwapiv1.ListenerStatus{Name: "extra",
		Conditions: []metav1.Condition{cond("Programmed", "True", "Programmed", gen, t1)}})
	return st
}

func TestGatewayStatusUnbound(t *testing.T) {
	addr := []gwapiv1.GatewayStatusAddress{{Type: ptr(gwapiv1.IPAddressType), Value: "10.99.0.1"}}
	inUse := func(listener, proxy string) ListenerFailure {
		return ListenerFailure{Listener: listener, Proxy: proxy, Address: "10.99.0.1:8080",
			Error: "listen tcp 10.99.0.1:8080: bind: address already in use"}
	}
	notLocal := ListenerFailure{Listener: "http", Proxy: "p1", Address: "203.0.113.9:8080",
		Error: "listen tcp 203.0.113.9:8080: bind: cannot assign requested address", AddressNotUsable: true}
	type want struct {
		status, reason string
		message        []string
	}
	tests := []struct {
		name     string
		desired  *gwapiv1.GatewayStatus
		unbound  []ListenerFailure
		applied  int64
		gateway  want
		http     want
		extra    want
		liveTrue bool // live says Programmed=True everywhere for an older generation
	}{
		{name: "nothing unbound: all Programmed", desired: twoListeners(2), applied: 2,
			gateway: want{"True", "Programmed", nil}, http: want{"True", "Programmed", nil}, extra: want{"True", "Programmed", nil}},
		{name: "one listener's port taken: that listener only", desired: twoListeners(2), applied: 2,
			unbound: []ListenerFailure{inUse("extra", "p2")},
			gateway: want{"True", "Programmed", nil}, http: want{"True", "Programmed", nil},
			extra: want{"False", "Pending", []string{"Proxy p2 cannot bind 10.99.0.1:8080", "address already in use", "retries"}}},
		{name: "two proxies fail the same listener: both named", desired: twoListeners(2), applied: 2,
			unbound: []ListenerFailure{inUse("extra", "p1"), inUse("extra", "p2")},
			gateway: want{"True", "Programmed", nil}, http: want{"True", "Programmed", nil},
			extra: want{"False", "Pending", []string{"Proxy p1 cannot bind", "proxy p2 cannot bind"}}},
		{name: "no listener bound: the Gateway is not Programmed", desired: twoListeners(2), applied: 2,
			unbound: []ListenerFailure{inUse("extra", "p1"), inUse("http", "p1")},
			gateway: want{"False", "Pending", []string{"No listener can be bound", "p1"}},
			http:    want{"False", "Pending", nil}, extra: want{"False", "Pending", nil}},
		{name: "an address that is not the proxy's: AddressNotUsable", desired: twoListeners(2), applied: 2,
			unbound: []ListenerFailure{notLocal},
			gateway: want{"False", "AddressNotUsable", []string{"Address 203.0.113.9 cannot be bound on proxy p1", "spec.addresses"}},
			http:    want{"False", "Pending", []string{"cannot assign requested address"}}, extra: want{"True", "Programmed", nil}},
		{name: "a failure shows while the generation is held", desired: twoListeners(3), applied: 2, liveTrue: true,
			unbound: []ListenerFailure{inUse("extra", "p2")},
			gateway: want{"True", "Programmed", nil}, http: want{"True", "Programmed", nil},
			extra: want{"False", "Pending", []string{"Proxy p2 cannot bind"}}},
		{name: "an invalid listener keeps its own reason", desired: func() *gwapiv1.GatewayStatus {
			st := twoListeners(2)
			st.Listeners[1].Conditions[0] = cond("Programmed", "False", "Invalid", 2, t1)
			return st
		}(), applied: 2, unbound: []ListenerFailure{inUse("extra", "p1")},
			gateway: want{"True", "Programmed", nil}, http: want{"True", "Programmed", nil}, extra: want{"False", "Invalid", nil}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			live := gwapiv1.GatewayStatus{Addresses: addr}
			if tc.liveTrue {
				live = *twoListeners(tc.applied)
				live.Addresses = addr
			}
			gen := generationOf(tc.desired.Conditions)
			got := gatewayStatus(live, tc.desired, gate{Generation: gen, Applied: tc.applied, Addresses: addr, Unbound: tc.unbound, Now: t1})
			check := func(what string, conds []metav1.Condition, w want) {
				t.Helper()
				c := meta.FindStatusCondition(conds, "Programmed")
				if c == nil || string(c.Status) != w.status || c.Reason != w.reason {
					t.Fatalf("%s Programmed = %+v, want %s/%s", what, c, w.status, w.reason)
				}
				for _, m := range w.message {
					if !strings.Contains(c.Message, m) {
						t.Errorf("%s message %q lacks %q", what, c.Message, m)
					}
				}
				if w.status == "False" && c.ObservedGeneration != gen && w.reason != "Invalid" {
					t.Errorf("%s observedGeneration %d, want %d", what, c.ObservedGeneration, gen)
				}
			}
			check("Gateway", got.Conditions, tc.gateway)
			check("listener http", got.Listeners[0].Conditions, tc.http)
			check("listener extra", got.Listeners[1].Conditions, tc.extra)
			if a := meta.FindStatusCondition(got.Conditions, "Accepted"); a == nil || a.Status != "True" {
				t.Errorf("Accepted = %+v: a bind failure never un-accepts", a)
			}
		})
	}
}
