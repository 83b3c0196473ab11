package delta

import (
	"fmt"
	"slices"

	discv1 "github.com/coxswain-labs/coxswain/core/discovery/v1"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// Apply rebuilds the snapshot d describes from base, which must be the snapshot of
// d.BaseVersion. The result shares every unchanged message with base (neither is modified) and
// carries version, unchecked: the caller reseals it (irv1.Sealer) and compares. An error says d does
// not fit base: a name it removes or patches is not there, an index is out of range.
func Apply(base *irv1.Snapshot, d *discv1.Delta, version string) (*irv1.Snapshot, error) {
	if d.GetBaseVersion() != base.GetVersion() {
		return nil, fmt.Errorf("the delta is against %q, the proxy has %q", d.GetBaseVersion(), base.GetVersion())
	}
	out := &irv1.Snapshot{Version: version}
	baseListeners := byName(base.GetListeners(), (*irv1.Listener).GetName)
	changed := make([]*irv1.Listener, 0, len(d.GetListeners()))
	idx := make([]uint32, 0, len(d.GetListeners()))
	for _, lc := range d.GetListeners() {
		l, err := applyListener(baseListeners, lc)
		if err != nil {
			return nil, err
		}
		changed = append(changed, l)
		idx = append(idx, lc.GetIndex())
	}
	var err error
	if out.Listeners, err = merge(base.GetListeners(), (*irv1.Listener).GetName, d.GetRemovedListeners(), changed, idx); err != nil {
		return nil, fmt.Errorf("listeners: %w", err)
	}
	if out.Clusters, err = merge(base.GetClusters(), (*irv1.Cluster).GetName, d.GetRemovedClusters(), d.GetClusters(), d.GetClusterIndexes()); err != nil {
		return nil, fmt.Errorf("clusters: %w", err)
	}
	if out.Secrets, err = merge(base.GetSecrets(), (*irv1.Secret).GetName, d.GetRemovedSecrets(), d.GetSecrets(), d.GetSecretIndexes()); err != nil {
		return nil, fmt.Errorf("secrets: %w", err)
	}
	if out.Gateways, err = merge(base.GetGateways(), gatewayName, d.GetRemovedGateways(), d.GetGateways(), d.GetGatewayIndexes()); err != nil {
		return nil, fmt.Errorf("gateways: %w", err)
	}
	out.AcmeChallenges = base.GetAcmeChallenges()
	if d.GetAcmeChanged() {
		out.AcmeChallenges = d.GetAcmeChallenges()
	}
	return out, nil
}

func applyListener(base map[string]*irv1.Listener, lc *discv1.ListenerChange) (*irv1.Listener, error) {
	l := lc.GetListener()
	if l == nil {
		return nil, fmt.Errorf("listener change at %d carries no listener", lc.GetIndex())
	}
	if !lc.GetPatched() {
		return l, nil
	}
	b := base[l.GetName()]
	if b == nil {
		return nil, fmt.Errorf("listener %q: patched, but not in the base", l.GetName())
	}
	baseServers := byName(b.GetServers(), (*irv1.Server).GetHostname)
	changed := make([]*irv1.Server, 0, len(lc.GetServers()))
	idx := make([]uint32, 0, len(lc.GetServers()))
	for _, sc := range lc.GetServers() {
		s, err := applyServer(baseServers, sc)
		if err != nil {
			return nil, fmt.Errorf("listener %q: %w", l.GetName(), err)
		}
		changed = append(changed, s)
		idx = append(idx, sc.GetIndex())
	}
	servers, err := merge(b.GetServers(), (*irv1.Server).GetHostname, lc.GetRemovedServers(), changed, idx)
	if err != nil {
		return nil, fmt.Errorf("listener %q servers: %w", l.GetName(), err)
	}
	// l was decoded from this delta alone: completing it shares nothing a caller holds.
	l.Servers = servers
	return l, nil
}

func applyServer(base map[string]*irv1.Server, sc *discv1.ServerChange) (*irv1.Server, error) {
	s := sc.GetServer()
	if s == nil {
		return nil, fmt.Errorf("server change at %d carries no server", sc.GetIndex())
	}
	if !sc.GetPatched() {
		return s, nil
	}
	b := base[s.GetHostname()]
	if b == nil {
		return nil, fmt.Errorf("server %q: patched, but not in the base", s.GetHostname())
	}
	vhs, err := merge(b.GetVirtualHosts(), (*irv1.VirtualHost).GetHostname, sc.GetRemovedVirtualHosts(), sc.GetVirtualHosts(), sc.GetVirtualHostIndexes())
	if err != nil {
		return nil, fmt.Errorf("server %q virtual hosts: %w", s.GetHostname(), err)
	}
	s.VirtualHosts = vhs
	return s, nil
}

func byName[T any](list []T, name func(T) string) map[string]T {
	m := make(map[string]T, len(list))
	for _, e := range list {
		m[name(e)] = e
	}
	return m
}

// merge is one list of the new snapshot: base without the removed elements and those of a
// changed element's name, the changed ones inserted at their indexes (ascending).
func merge[T any](base []T, name func(T) string, removed []string, changed []T, idx []uint32) ([]T, error) {
	if len(changed) != len(idx) {
		return nil, fmt.Errorf("%d changed elements, %d indexes", len(changed), len(idx))
	}
	if len(removed) == 0 && len(changed) == 0 {
		return base, nil
	}
	if out, ok := replaced(base, name, removed, changed, idx); ok {
		return out, nil
	}
	drop := make(map[string]bool, len(removed)+len(changed))
	present := byName(base, name)
	for _, k := range removed {
		if _, ok := present[k]; !ok {
			return nil, fmt.Errorf("%q is removed but not in the base", k)
		}
		drop[k] = true
	}
	for _, e := range changed {
		drop[name(e)] = true
	}
	kept := 0
	for _, e := range base {
		if !drop[name(e)] {
			kept++
		}
	}
	n := kept + len(changed)
	out := make([]T, 0, n)
	next, c := 0, 0 // the next base element to consider, the next changed one
	for pos := range n {
		if c < len(changed) && int(idx[c]) == pos {
			out = append(out, changed[c])
			c++
			continue
		}
		for next < len(base) && drop[name(base[next])] {
			next++
		}
		if next == len(base) {
			return nil, fmt.Errorf("index %d out of order or range", pos)
		}
		out = append(out, base[next])
		next++
	}
	if c != len(changed) {
		return nil, fmt.Errorf("index %d out of order or range", idx[c])
	}
	return out, nil
}

// replaced is merge's common case without a map of base's names (10,000 virtual hosts of a
// server at 20,000 routes, per push): nothing removed, and every changed element takes the place
// of the base element of its own name, at ascending indexes. ok is false for any other delta,
// which merge handles. For a base whose names are unique, as in every snapshot an engine
// accepted, the result is merge's; for any other the reseal's version check tells.
func replaced[T any](base []T, name func(T) string, removed []string, changed []T, idx []uint32) (_ []T, ok bool) {
	if len(removed) != 0 {
		return nil, false
	}
	prev := -1
	for c, e := range changed {
		i := int(idx[c])
		if i <= prev || i >= len(base) || name(base[i]) != name(e) {
			return nil, false
		}
		prev = i
	}
	out := slices.Clone(base)
	for c, e := range changed {
		out[idx[c]] = e
	}
	return out, true
}
