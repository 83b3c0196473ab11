package status

import (
	"fmt"
	"net"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// ListenerFailure is one Gateway listener one proxy could not bind (controller.ListenerFailure).
type ListenerFailure struct {
	// Listener is the Gateway listener's name (its sectionName).
	Listener string
	// Proxy is the node name of the proxy that failed.
	Proxy string
	// Address is the "host:port" it tried to bind, and Error why that failed.
	Address, Error string
	// AddressNotUsable says the address itself is not usable on that proxy (not one of its
	// host's addresses), rather than the port being taken.
	AddressNotUsable bool
}

// maxFailureMessage bounds a condition message built from bind failures.
const maxFailureMessage = 2048

// applyUnbound marks in out (built from desired by gatewayStatus) what the proxies cannot bind:
//
//   - a listener one of them cannot bind is Programmed=False, reason Pending (the spec's reason
//     for a listener "not yet online and ready to accept client traffic"; the proxies retry), with
//     a message naming the proxy, the address and the error. Its Accepted stays True: the listener
//     is valid, and the other proxies (and this one's other listeners) serve.
//   - the Gateway is Programmed=False with reason AddressNotUsable when one of its addresses is
//     not usable on a proxy (the spec's reason for "a provided static address can't be used"),
//     else with reason Pending when none of its programmable listeners is bound anywhere it
//     should be; otherwise its Programmed is left as it is.
//
// Only conditions the translator made True are turned False: an invalid listener keeps its own
// reason.
// gatewayLevel false leaves the Gateway's own conditions alone (AddressNotAssigned says more).
func applyUnbound(out *gwapiv1.GatewayStatus, live gwapiv1.GatewayStatus, desired *gwapiv1.GatewayStatus, g gate, gatewayLevel bool) {
	if len(g.Unbound) == 0 {
		return
	}
	byListener := map[string][]ListenerFailure{}
	var unusable []ListenerFailure
	for _, f := range g.Unbound {
		byListener[f.Listener] = append(byListener[f.Listener], f)
		if f.AddressNotUsable {
			unusable = append(unusable, f)
		}
	}
	programmable, failed := 0, 0
	for i := range out.Listeners {
		l := &out.Listeners[i]
		if !programmedTrue(desiredListener(desired, l.Name)) {
			continue
		}
		programmable++
		fs := byListener[string(l.Name)]
		if len(fs) == 0 {
			continue
		}
		failed++
		setFalse(l.Conditions, string(gwapiv1.ListenerConditionProgrammed), string(gwapiv1.ListenerReasonPending), listenerMessage(fs), g)
		l.Conditions = mergeConditions(liveListener(live, l.Name), l.Conditions)
	}
	if !gatewayLevel || !programmedTrue(desired.Conditions) {
		return // AddressNotAssigned, or the translator's own False, says more
	}
	switch {
	case len(unusable) > 0:
		setFalse(out.Conditions, string(gwapiv1.GatewayConditionProgrammed), string(gwapiv1.GatewayReasonAddressNotUsable), unusableMessage(unusable), g)
	case programmable > 0 && failed == programmable:
		setFalse(out.Conditions, string(gwapiv1.GatewayConditionProgrammed), string(gwapiv1.GatewayReasonPending),
			"No listener can be bound: "+listenerMessage(g.Unbound), g)
	default:
		return
	}
	out.Conditions = mergeConditions(live.Conditions, out.Conditions)
}

// WithUnbound returns a copy of a translated Gateway status with what proxies cannot bind marked
// as the status writer marks it (standalone `serve` uses it for the status it reports).
func WithUnbound(desired *gwapiv1.GatewayStatus, failures []ListenerFailure, now metav1.Time) *gwapiv1.GatewayStatus {
	if desired == nil || len(failures) == 0 {
		return desired
	}
	out := desired.DeepCopy()
	g := gate{Generation: generationOf(desired.Conditions), Unbound: failures, Now: now}
	applyUnbound(out, *desired, desired, g, true)
	return out
}

func programmedTrue(conds []metav1.Condition) bool {
	return meta.IsStatusConditionTrue(conds, string(gwapiv1.GatewayConditionProgrammed))
}

func desiredListener(desired *gwapiv1.GatewayStatus, name gwapiv1.SectionName) []metav1.Condition {
	for _, l := range desired.Listeners {
		if l.Name == name {
			return l.Conditions
		}
	}
	return nil
}

func liveListener(live gwapiv1.GatewayStatus, name gwapiv1.SectionName) []metav1.Condition {
	for _, l := range live.Listeners {
		if l.Name == name {
			return l.Conditions
		}
	}
	return nil
}

// listenerMessage says which proxies cannot bind what, and why.
func listenerMessage(fs []ListenerFailure) string {
	parts := make([]string, 0, len(fs))
	for _, f := range fs {
		parts = append(parts, fmt.Sprintf("proxy %s cannot bind %s: %s", f.Proxy, f.Address, f.Error))
	}
	msg := strings.Join(parts, "; ") + " (the proxy serves everything else and retries)"
	return capitalize(truncate(msg, maxFailureMessage))
}

// unusableMessage says which address is not usable where, and what to do about it.
func unusableMessage(fs []ListenerFailure) string {
	parts := make([]string, 0, len(fs))
	for _, f := range fs {
		host, _, err := net.SplitHostPort(f.Address)
		if err != nil {
			host = f.Address
		}
		parts = append(parts, fmt.Sprintf("address %s cannot be bound on proxy %s (%s)", host, f.Proxy, f.Error))
	}
	msg := strings.Join(parts, "; ") + ": it is not an address of the proxy's host. Remove it from spec.addresses, or make it local to the proxies serving this Gateway"
	return capitalize(truncate(msg, maxFailureMessage))
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
