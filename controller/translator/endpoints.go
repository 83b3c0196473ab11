package translator

import (
	"context"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// RefreshEndpoints is the endpoints fast path. prev must be the snapshot Translate made from a
// store that differed from store in EndpointSlices only: then nothing but the endpoints of prev's
// clusters can have changed, because routes name clusters and whether a backendRef resolves
// depends on Services, never on their endpoints. It recomputes every cluster's endpoints from
// store and returns a sealed snapshot sharing everything else (listeners, routes, secrets) with
// prev, which it does not modify. The result is what Translate(store) would give, at the cost of
// indexing the store and re-sealing instead of translating every route.
func RefreshEndpoints(ctx context.Context, prev *irv1.Snapshot, store *Store, opts Options) *irv1.Snapshot {
	return refreshEndpoints(ctx, prev, store, opts, irv1.Seal)
}

// RefreshEndpoints is RefreshEndpoints(ctx, prev, store, opts) sealed with inc's sealer, which
// remembers the hashes of prev's parts when prev is inc's latest snapshot: the refresh then
// hashes the changed clusters and the snapshot's head only, not every route again.
func (inc *Incremental) RefreshEndpoints(ctx context.Context, prev *irv1.Snapshot, store *Store, opts Options) *irv1.Snapshot {
	return refreshEndpoints(ctx, prev, store, opts, inc.sealer.seal)
}

func refreshEndpoints(ctx context.Context, prev *irv1.Snapshot, store *Store, opts Options, seal func(*irv1.Snapshot) error) *irv1.Snapshot {
	t := newSession(ctx, store, opts)
	t.index()
	next := &irv1.Snapshot{Listeners: prev.GetListeners(), Secrets: prev.GetSecrets(), Gateways: prev.GetGateways(),
		AcmeChallenges: prev.GetAcmeChallenges()} // a change of challenges is a full translation
	for _, c := range prev.GetClusters() {
		next.Clusters = append(next.Clusters, t.refreshCluster(c))
	}
	_ = seal(next) // prev was sealed, so its strings are valid UTF-8
	return next
}

// refreshCluster returns c with its endpoints recomputed, or c itself when they are unchanged or
// its Service port cannot be found (which a Service change, not a slice change, would cause).
func (t *session) refreshCluster(c *irv1.Cluster) *irv1.Cluster {
	svc, sp := t.servicePort(c.GetName(), c.GetProtocol())
	if sp == nil {
		return c
	}
	fresh := t.cluster(c.GetName(), svc, sp, c.GetProtocol())
	if endpointsEqual(fresh.GetEndpoints(), c.GetEndpoints()) {
		return c
	}
	out := proto.Clone(c).(*irv1.Cluster)
	out.Endpoints = fresh.GetEndpoints()
	return out
}

// servicePort finds the Service port a cluster named "<namespace>/<service>:<port>" (with a
// "/tcp" or "/udp" suffix for the clusters of layer-4 routes, "/h2c" for some of GRPCRoute's,
// then a route's own settings, routeClusterMarker, and the TLS suffixes) was made of.
func (t *session) servicePort(name string, proto irv1.Cluster_Protocol) (*corev1.Service, *corev1.ServicePort) {
	transport := corev1.ProtocolTCP
	name = trimTLSSuffixes(name)
	if i := strings.Index(name, routeClusterMarker); i >= 0 {
		name = name[:i]
	}
	if suffix := protocolSuffix(proto); suffix != "" {
		name = strings.TrimSuffix(name, "/"+suffix)
		if proto == irv1.Cluster_UDP {
			transport = corev1.ProtocolUDP
		}
	}
	slash, colon := strings.IndexByte(name, '/'), strings.LastIndexByte(name, ':')
	if slash < 0 || colon < slash {
		return nil, nil
	}
	port, err := strconv.ParseInt(name[colon+1:], 10, 32)
	if err != nil {
		return nil, nil
	}
	svc := t.services[nn(name[:slash], name[slash+1:colon])]
	if svc == nil {
		return nil, nil
	}
	for i := range svc.Spec.Ports {
		p := &svc.Spec.Ports[i]
		if int64(p.Port) == port && (p.Protocol == transport || (p.Protocol == "" && transport == corev1.ProtocolTCP)) {
			return svc, p
		}
	}
	return nil, nil
}

func endpointsEqual(a, b []*irv1.Endpoint) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !proto.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}
