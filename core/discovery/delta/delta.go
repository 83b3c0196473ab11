// Package delta describes a snapshot as changes to another one (discv1.Delta) and rebuilds it
// from them: the controller's Diff and the proxy's Apply. The proxy checks the rebuilt
// snapshot's version with irv1.Sealer, which does not encode its unchanged parts again.
//
// The unit of change is what the seal and the proxy's incremental build already treat apart: a
// virtual host (its hostname and routes), a cluster, a secret, a Gateway generation; listeners
// and servers, the containers above virtual hosts, are either sent whole or patched (their own
// fields, plus changes to their children). A one-route change is therefore one virtual host on
// the wire, and Apply shares every other message with the base, so a proxy decodes ~300 bytes
// instead of the whole snapshot, and its irv1.Sealer and incremental build find the shared
// messages.
package delta

import (
	"bytes"
	"fmt"

	"google.golang.org/protobuf/proto"

	discv1 "github.com/coxswain-labs/coxswain/core/discovery/v1"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// Diff describes next as changes to base. It fails only when next cannot be described that way
// (two elements of one list with the same name): the caller then sends next in full. The delta
// shares next's messages: it must be encoded before next could change (never: snapshots are
// immutable once published).
func Diff(base, next *irv1.Snapshot) (*discv1.Delta, error) {
	d := &discv1.Delta{BaseVersion: base.GetVersion()}
	var ok bool
	var patches map[int]*discv1.ListenerChange
	lc, ok := diffList(base.GetListeners(), next.GetListeners(), (*irv1.Listener).GetName, func(i int, b, n *irv1.Listener) bool {
		ch, equal := diffListener(b, n)
		if ch != nil {
			if patches == nil {
				patches = map[int]*discv1.ListenerChange{}
			}
			patches[i] = ch
		}
		return equal
	})
	if !ok {
		return nil, fmt.Errorf("listeners: %w", errNames)
	}
	d.RemovedListeners = lc.removed
	for _, i := range lc.changed {
		ch := patches[i]
		if ch == nil {
			ch = &discv1.ListenerChange{Listener: next.GetListeners()[i]}
		}
		ch.Index = uint32(i)
		d.Listeners = append(d.Listeners, ch)
	}
	if d.Clusters, d.ClusterIndexes, d.RemovedClusters, ok = diffLeaves(base.GetClusters(), next.GetClusters(), (*irv1.Cluster).GetName); !ok {
		return nil, fmt.Errorf("clusters: %w", errNames)
	}
	if d.Secrets, d.SecretIndexes, d.RemovedSecrets, ok = diffLeaves(base.GetSecrets(), next.GetSecrets(), (*irv1.Secret).GetName); !ok {
		return nil, fmt.Errorf("secrets: %w", errNames)
	}
	if d.Gateways, d.GatewayIndexes, d.RemovedGateways, ok = diffLeaves(base.GetGateways(), next.GetGateways(), gatewayName); !ok {
		return nil, fmt.Errorf("gateways: %w", errNames)
	}
	if !sameLists(base.GetAcmeChallenges(), next.GetAcmeChallenges()) {
		d.AcmeChanged, d.AcmeChallenges = true, next.GetAcmeChallenges()
	}
	return d, nil
}

var errNames = fmt.Errorf("two elements of one list have the same name")

var deterministic = proto.MarshalOptions{Deterministic: true}

func gatewayName(g *irv1.GatewayGeneration) string { return g.GetNamespace() + "/" + g.GetName() }

// diffListener compares two listeners of one name: equal, or the patch turning b into n (nil
// when n must go whole: its servers' names are not unique).
func diffListener(b, n *irv1.Listener) (*discv1.ListenerChange, bool) {
	headSame := same(irv1.ListenerHead(b), irv1.ListenerHead(n))
	var patches map[int]*discv1.ServerChange
	lc, ok := diffList(b.GetServers(), n.GetServers(), (*irv1.Server).GetHostname, func(i int, bs, ns *irv1.Server) bool {
		ch, equal := diffServer(bs, ns)
		if ch != nil {
			if patches == nil {
				patches = map[int]*discv1.ServerChange{}
			}
			patches[i] = ch
		}
		return equal
	})
	if !ok {
		return nil, false
	}
	if headSame && len(lc.changed) == 0 && len(lc.removed) == 0 {
		return nil, true
	}
	ch := &discv1.ListenerChange{Listener: irv1.ListenerHead(n), Patched: true, RemovedServers: lc.removed}
	for _, i := range lc.changed {
		sc := patches[i]
		if sc == nil {
			sc = &discv1.ServerChange{Server: n.GetServers()[i]}
		}
		sc.Index = uint32(i)
		ch.Servers = append(ch.Servers, sc)
	}
	return ch, false
}

func diffServer(b, n *irv1.Server) (*discv1.ServerChange, bool) {
	headSame := same(irv1.ServerHead(b), irv1.ServerHead(n))
	vhs, idx, removed, ok := diffLeaves(b.GetVirtualHosts(), n.GetVirtualHosts(), (*irv1.VirtualHost).GetHostname)
	if !ok {
		return nil, false
	}
	if headSame && len(vhs) == 0 && len(removed) == 0 {
		return nil, true
	}
	return &discv1.ServerChange{Server: irv1.ServerHead(n), Patched: true,
		VirtualHosts: vhs, VirtualHostIndexes: idx, RemovedVirtualHosts: removed}, false
}

// listDiff is how one list changed: the indexes in the new list of its changed (or added or
// moved) elements, ascending, and the names of the base's elements that are gone.
type listDiff struct {
	changed []int
	removed []string
}

// diffList compares two lists of named elements. equal(i, b, n) compares the new list's element
// i with the base's element of its name. An element equal to its base one but out of the base's
// order counts as changed (sent, at its index), so the elements left unsent keep their relative
// order, as Apply assumes. ok is false when a name repeats in either list's compared part.
//
// The elements both lists begin and end with (the same name, equal, at the same place from that
// end: all of them but the few a change touched, and the same messages, compared by pointer) are
// left out before any map is made: a list of 20,000 virtual hosts was two maps of 20,000 names
// per push (~5 ms of CPU), for a change of one. A name repeated there is not noticed: the delta
// then rebuilds another list on the proxy, whose reseal does not give the version, and it asks
// for the snapshot in full (the translator's lists never repeat a name).
func diffList[T comparable](base, next []T, name func(T) string, equal func(i int, b, n T) bool) (listDiff, bool) {
	// The same message is the same name and equal (snapshots are immutable once published): the
	// pointer comparison spares reading the message itself.
	same := func(i, j int) bool {
		return base[i] == next[j] || name(base[i]) == name(next[j]) && equal(j, base[i], next[j])
	}
	head := 0
	for head < len(base) && head < len(next) && same(head, head) {
		head++
	}
	tail := 0
	for tail < len(base)-head && tail < len(next)-head && same(len(base)-1-tail, len(next)-1-tail) {
		tail++
	}
	d, ok := diffWindow(base[head:len(base)-tail], next[head:len(next)-tail], name, func(i int, b, n T) bool { return equal(head+i, b, n) })
	for i := range d.changed {
		d.changed[i] += head
	}
	return d, ok
}

// diffWindow is diffList without the common head and tail; indexes are the window's.
func diffWindow[T comparable](base, next []T, name func(T) string, equal func(i int, b, n T) bool) (listDiff, bool) {
	at := make(map[string]int, len(base))
	for i, e := range base {
		if _, dup := at[name(e)]; dup {
			return listDiff{}, false
		}
		at[name(e)] = i
	}
	var d listDiff
	seen := make(map[string]bool, len(next))
	last := -1 // the base index of the last element kept
	for i, e := range next {
		k := name(e)
		if seen[k] {
			return listDiff{}, false
		}
		seen[k] = true
		j, found := at[k]
		if found && equal(i, base[j], e) && j > last {
			last = j
			continue
		}
		d.changed = append(d.changed, i)
	}
	for _, e := range base {
		if !seen[name(e)] {
			d.removed = append(d.removed, name(e))
		}
	}
	return d, true
}

// diffLeaves diffs a list of messages compared whole: the changed ones, their indexes, the
// names removed.
func diffLeaves[T interface {
	comparable
	proto.Message
}](base, next []T, name func(T) string) ([]T, []uint32, []string, bool) {
	d, ok := diffList(base, next, name, func(_ int, b, n T) bool { return b == n || same(b, n) })
	if !ok {
		return nil, nil, nil, false
	}
	var out []T
	var idx []uint32
	for _, i := range d.changed {
		out = append(out, next[i])
		idx = append(idx, uint32(i))
	}
	return out, idx, d.removed, true
}

// same compares two messages by their deterministic encodings: what the version hashes.
func same(a, b proto.Message) bool {
	ea, err1 := deterministic.Marshal(a)
	eb, err2 := deterministic.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(ea, eb)
}

func sameLists[T proto.Message](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !same(a[i], b[i]) {
			return false
		}
	}
	return true
}
