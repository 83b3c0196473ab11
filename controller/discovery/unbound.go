package discovery

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"go.uber.org/zap"

	"github.com/coxswain-labs/coxswain/controller"
	discv1 "github.com/coxswain-labs/coxswain/core/discovery/v1"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// gatewaySections maps every Gateway of snap, and every snapshot listener serving it, to the
// Gateway listeners (section names) that listener carries: what a proxy's bind failure of a
// snapshot listener means for the Gateway's status.
func gatewaySections(snap *irv1.Snapshot) map[gwKey]map[string][]string {
	out := map[gwKey]map[string][]string{}
	for _, l := range snap.GetListeners() {
		for _, sv := range l.GetServers() {
			for _, src := range sv.GetSources() {
				parts := strings.SplitN(src, "/", 3)
				if len(parts) < 3 {
					continue
				}
				k := gwKey{parts[0], parts[1]}
				if out[k] == nil {
					out[k] = map[string][]string{}
				}
				if secs := out[k][l.GetName()]; !slices.Contains(secs, parts[2]) {
					out[k][l.GetName()] = append(secs, parts[2])
				}
			}
		}
	}
	return out
}

// failures lists what the proxies serving Gateway k cannot bind of its listeners in the latest
// snapshot, sorted by Gateway listener then proxy (t.mu held). A proxy that has not applied the
// latest snapshot yet reports on the listeners it has: a listener keeps its name across
// snapshots ("<address>:<port>/<protocol>"), so its failure means the same thing.
func (t *term) failures(k gwKey) []controller.ListenerFailure {
	var out []controller.ListenerFailure
	if t.latest == nil {
		return nil
	}
	for _, s := range t.sessions {
		if !s.serves(k) || len(s.failed) == 0 {
			continue
		}
		for _, l := range t.latest.listeners[k] {
			f := s.failed[l]
			if f == nil {
				continue
			}
			for _, sec := range t.latest.sections[k][l] {
				out = append(out, controller.ListenerFailure{Listener: sec, Proxy: s.node, Address: f.GetAddress(),
					Error: f.GetMessage(), AddressNotUsable: f.GetReason() == discv1.BindFailureReason_BIND_FAILURE_REASON_ADDRESS_NOT_AVAILABLE})
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Listener != out[j].Listener {
			return out[i].Listener < out[j].Listener
		}
		return out[i].Proxy < out[j].Proxy
	})
	return out
}

// reportUnbound reports Gateway k's bind failures when they changed since the last report
// (t.mu held).
func (t *term) reportUnbound(k gwKey, st *gwState) {
	fs := t.failures(k)
	digest := failureDigest(fs)
	if digest == st.unbound {
		return
	}
	st.unbound = digest
	if len(fs) > 0 {
		t.log.Warn("proxies cannot bind listeners of a Gateway; they serve everything else and retry",
			zap.String("gateway", k.String()), zap.String("failures", digest))
	} else {
		t.log.Info("every proxy has bound the Gateway's listeners", zap.String("gateway", k.String()))
	}
	t.report.Unbound(st.gen, fs)
}

func failureDigest(fs []controller.ListenerFailure) string {
	var b strings.Builder
	for i, f := range fs {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s on %s: %s: %s", f.Listener, f.Proxy, f.Address, f.Error)
	}
	return b.String()
}

// countFailures counts the failed listeners of every connected proxy (t.mu held).
func (t *term) countFailures() int {
	n := 0
	for _, s := range t.sessions {
		n += len(s.failed)
	}
	return n
}
