package provision

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// PortKey is one socket a Gateway's listeners share: a listener port and its transport. Every
// listener of a Gateway on the same port and transport is served by one internal port.
type PortKey struct {
	Port     int32
	Protocol corev1.Protocol // TCP or UDP
}

// PortRange is the range of internal ports the shared proxies bind for Gateway listeners; no
// other socket of the proxy pod may be in it.
type PortRange struct{ First, Last int32 }

// DefaultPortRange is 20000-29999: above the well-known and registered ports services are
// commonly configured on, below the default NodePort range (30000-32767) and the Linux ephemeral
// range (32768-60999), so an internal port never collides with an outgoing connection's port.
var DefaultPortRange = PortRange{First: 20000, Last: 29999}

func (r PortRange) contains(p int32) bool { return p >= r.First && p <= r.Last }

// Validate says why the range is unusable.
func (r PortRange) Validate() error {
	if r.First < 1024 || r.Last > 65535 || r.First > r.Last {
		return fmt.Errorf("internal port range %d-%d: want 1024 <= first <= last <= 65535", r.First, r.Last)
	}
	return nil
}

// portAllocator gives every (Gateway, PortKey) an internal port of its own. Its durable record
// is the owned VIP Services' targetPorts: before allocating, the controller seeds it from them
// (seed), so that allocations survive a restart or a failover to another replica, which reads
// the same Services. A port stays with its Gateway listener until the Gateway no longer listens
// on that port (release).
type portAllocator struct {
	r      PortRange
	byKey  map[types.NamespacedName]map[PortKey]int32
	holder map[int32]types.NamespacedName
}

func newPortAllocator(r PortRange) *portAllocator {
	return &portAllocator{r: r, byKey: map[types.NamespacedName]map[PortKey]int32{}, holder: map[int32]types.NamespacedName{}}
}

// seed records what a Gateway's live VIP Service says. A targetPort outside the range, or held by
// another Gateway already (two Services claiming one port: only an edit by hand does that), is
// ignored: the listener gets a fresh port and the Service is repaired.
//
// TCP ports are read first: a UDP port targeting the internal port of the same Gateway's TCP
// socket is HTTP/3's (Sockets.HTTP3), which shares that number and holds none of its own.
func (a *portAllocator) seed(gw types.NamespacedName, svc *corev1.Service) {
	ports := append([]corev1.ServicePort(nil), svc.Spec.Ports...)
	sort.SliceStable(ports, func(i, j int) bool { return protocolOf(ports[i].Protocol) < protocolOf(ports[j].Protocol) })
	for _, sp := range ports {
		tp := sp.TargetPort.IntVal
		if sp.TargetPort.Type != 0 || !a.r.contains(tp) {
			continue
		}
		k := PortKey{Port: sp.Port, Protocol: protocolOf(sp.Protocol)}
		if _, ok := a.byKey[gw][k]; ok {
			continue
		}
		if _, taken := a.holder[tp]; taken {
			continue
		}
		a.set(gw, k, tp)
	}
}

func (a *portAllocator) set(gw types.NamespacedName, k PortKey, p int32) {
	if a.byKey[gw] == nil {
		a.byKey[gw] = map[PortKey]int32{}
	}
	a.byKey[gw][k] = p
	a.holder[p] = gw
}

// allocate returns the internal ports of gw's keys, giving new keys the lowest free ports and
// releasing the ports of keys gw no longer has. It fails only when the range is used up.
func (a *portAllocator) allocate(gw types.NamespacedName, keys []PortKey) (map[PortKey]int32, error) {
	want := map[PortKey]bool{}
	for _, k := range keys {
		want[k] = true
	}
	for k, p := range a.byKey[gw] {
		if !want[k] {
			delete(a.byKey[gw], k)
			delete(a.holder, p)
		}
	}
	sorted := append([]PortKey(nil), keys...)
	sort.Slice(sorted, func(i, j int) bool { return keyLess(sorted[i], sorted[j]) })
	next := a.r.First
	for _, k := range sorted {
		if _, ok := a.byKey[gw][k]; ok {
			continue
		}
		for ; next <= a.r.Last; next++ {
			if _, taken := a.holder[next]; !taken {
				break
			}
		}
		if next > a.r.Last {
			return nil, fmt.Errorf("no free internal port in %d-%d for port %d/%s: widen --internal-port-range", a.r.First, a.r.Last, k.Port, k.Protocol)
		}
		a.set(gw, k, next)
	}
	out := make(map[PortKey]int32, len(keys))
	for _, k := range keys {
		out[k] = a.byKey[gw][k]
	}
	return out, nil
}

// release frees every port of a Gateway that is gone.
func (a *portAllocator) release(gw types.NamespacedName) {
	for _, p := range a.byKey[gw] {
		delete(a.holder, p)
	}
	delete(a.byKey, gw)
}

func keyLess(a, b PortKey) bool {
	if a.Port != b.Port {
		return a.Port < b.Port
	}
	return a.Protocol < b.Protocol
}

func protocolOf(p corev1.Protocol) corev1.Protocol {
	if p == "" {
		return corev1.ProtocolTCP
	}
	return p
}
