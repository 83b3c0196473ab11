package proxy

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/coxswain-labs/coxswain/core"
)

// builder implements core.Clusters for the modules of the table it builds: clusters are built
// first, so a filter's Provision finds every cluster of the snapshot.
var _ core.Clusters = (*builder)(nil)

// Cluster implements core.Clusters.
func (b *builder) Cluster(name string) (core.Cluster, error) {
	cl, ok := b.lookupCluster(name)
	if !ok {
		return nil, fmt.Errorf("cluster %s is not in the snapshot", name)
	}
	return clusterHandle{cl}, nil
}

// clusterHandle is a cluster as core.Cluster: its balancer over its current endpoints.
type clusterHandle struct{ cl *cluster }

func (u clusterHandle) Name() string { return u.cl.name }

func (u clusterHandle) Pick(info *core.PickInfo) *core.Endpoint { return u.cl.balancer.Pick(info) }

func (u clusterHandle) ConnectTimeout() time.Duration { return u.cl.conn.connect }

func (u clusterHandle) DialTLS() func(ctx context.Context, network, addr string) (net.Conn, error) {
	return u.cl.conn.dialTLS()
}
