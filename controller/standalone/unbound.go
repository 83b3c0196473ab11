package standalone

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/controller/status"
	"github.com/coxswain-labs/coxswain/controller/translator"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy"
)

// proxyName is how standalone status names its one, in-process proxy.
const proxyName = "standalone"

// UnboundListener is a listener of the configuration serving now that the process could not
// bind (the port is taken, the address is not local). Everything else serves; the proxy retries
// it with backoff, and it leaves this list once bound.
type UnboundListener struct {
	// Listener is the snapshot listener ("<address>:<port>/<protocol>"), Address what was tried.
	Listener string    `json:"listener"`
	Address  string    `json:"address"`
	Reason   string    `json:"reason"`
	Error    string    `json:"error"`
	Since    time.Time `json:"since"`
	Attempts int       `json:"attempts"`
	// Gateways are the Gateway listeners it carries, "<namespace>/<gateway>/<listener>".
	Gateways []string `json:"gateways"`
}

// Unbound lists the listeners the engine cannot bind now, with the Gateway listeners they carry.
func (r *Runner) Unbound() []UnboundListener {
	if r.opts.Engine == nil {
		return nil
	}
	failed := r.opts.Engine.Failed()
	if len(failed) == 0 {
		return nil
	}
	sources := listenerSources(r.State().snap)
	out := make([]UnboundListener, 0, len(failed))
	for _, f := range failed {
		out = append(out, UnboundListener{Listener: f.Name, Address: f.Address, Reason: string(f.Reason), Error: f.Error,
			Since: f.Since, Attempts: f.Attempts, Gateways: sources[f.Name]})
	}
	return out
}

// listenerSources maps each snapshot listener to the Gateway listeners of its servers, sorted.
func listenerSources(snap *irv1.Snapshot) map[string][]string {
	out := map[string][]string{}
	for _, l := range snap.GetListeners() {
		seen := map[string]bool{}
		for _, sv := range l.GetServers() {
			for _, src := range sv.GetSources() {
				if !seen[src] {
					seen[src] = true
					out[l.GetName()] = append(out[l.GetName()], src)
				}
			}
		}
		sort.Strings(out[l.GetName()])
		if l.GetHttp3() != nil { // its UDP socket carries the same Gateway listeners
			out[proxy.HTTP3ListenerName(l)] = out[l.GetName()]
		}
	}
	return out
}

// logUnbound names, after an apply, every listener that could not be bound and the Gateway
// listeners that therefore do not serve (the proxy logs the socket error itself, and the retry
// that succeeds).
func (r *Runner) logUnbound() {
	for _, u := range r.Unbound() {
		r.log.Warn("listener cannot be bound; the rest of the configuration serves, and it is retried",
			zap.String("listener", u.Listener), zap.String("address", u.Address), zap.String("reason", u.Reason),
			zap.String("error", u.Error), zap.Strings("gatewayListeners", u.Gateways))
	}
}

// withUnbound returns rep with the Gateways whose listeners cannot be bound marked as the
// controller would mark them (the listener Programmed=False; the Gateway too when its address is
// not usable or nothing of it is bound), and a line per such condition in Failures. rep is not
// modified.
func withUnbound(rep *Report, unbound []UnboundListener, now time.Time) *Report {
	if rep == nil || len(unbound) == 0 {
		return rep
	}
	byGateway := map[string][]status.ListenerFailure{}
	for _, u := range unbound {
		for _, src := range u.Gateways {
			parts := strings.SplitN(src, "/", 3)
			if len(parts) < 3 {
				continue
			}
			gw := parts[0] + "/" + parts[1]
			byGateway[gw] = append(byGateway[gw], status.ListenerFailure{Listener: parts[2], Proxy: proxyName,
				Address: u.Address, Error: u.Error, AddressNotUsable: u.Reason == string(proxy.BindAddressNotAvailable)})
		}
	}
	out := *rep
	out.Gateways = make([]ObjectStatus, len(rep.Gateways))
	out.Failures = append([]string(nil), rep.Failures...)
	for i, o := range rep.Gateways {
		st, ok := o.Status.(*gwapiv1.GatewayStatus)
		fs := byGateway[o.Namespace+"/"+o.Name]
		if ok && len(fs) > 0 {
			st = status.WithUnbound(st, fs, metav1.NewTime(now.Truncate(time.Second)))
			o.Status = st
			out.Failures = append(out.Failures, programmedFailures("Gateway "+o.Namespace+"/"+o.Name, st)...)
		}
		out.Gateways[i] = o
	}
	out.ListenerSets = make([]ObjectStatus, len(rep.ListenerSets))
	for i, o := range rep.ListenerSets {
		st, ok := o.Status.(*gwapiv1.ListenerSetStatus)
		fs := byGateway[o.Namespace+"/"+translator.ListenerSetGatewayName(o.Name)]
		if ok && len(fs) > 0 {
			st = status.ListenerSetWithUnbound(st, fs, metav1.NewTime(now.Truncate(time.Second)))
			o.Status = st
			out.Failures = append(out.Failures, programmedFailures("ListenerSet "+o.Namespace+"/"+o.Name,
				&gwapiv1.GatewayStatus{Conditions: st.Conditions})...)
		}
		out.ListenerSets[i] = o
	}
	return &out
}

func programmedFailures(obj string, st *gwapiv1.GatewayStatus) []string {
	var out []string
	line := func(what string, conds []metav1.Condition) {
		for _, c := range conds {
			if c.Type == string(gwapiv1.GatewayConditionProgrammed) && c.Status == metav1.ConditionFalse {
				out = append(out, fmt.Sprintf("%s: %s=False (%s): %s", what, c.Type, c.Reason, c.Message))
			}
		}
	}
	line(obj, st.Conditions)
	for _, l := range st.Listeners {
		line(fmt.Sprintf("%s listener %s", obj, l.Name), l.Conditions)
	}
	return out
}
