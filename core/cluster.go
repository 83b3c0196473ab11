package core

import (
	"context"
	"net"
	"time"
)

// Cluster is a cluster of the snapshot as a module that calls a service of its own sees it (an
// external authorization filter calling its auth service): the cluster's current endpoints
// through its balancer. The endpoints change in place when pods come and go; Pick always chooses
// among the current ones.
type Cluster interface {
	// Name is the cluster's name ("<namespace>/<service>:<port>[/h2c]").
	Name() string
	// Pick chooses an endpoint for one call, nil when the cluster has none. Safe for concurrent
	// use; no allocation.
	Pick(info *PickInfo) *Endpoint
	// ConnectTimeout bounds connecting to an endpoint (the cluster's CoxswainBackendPolicy, else
	// the proxy's default).
	ConnectTimeout() time.Duration
	// DialTLS connects to an endpoint address and runs the cluster's upstream TLS handshake
	// (BackendTLSPolicy: its CA, SNI, SAN checks and the Gateway's client certificate), as the
	// proxy's own connections to the cluster do; nil when the cluster is cleartext. Shaped as
	// http.Transport's DialTLSContext.
	DialTLS() func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Clusters gives modules the clusters of the snapshot being built (BuildContext.Clusters).
type Clusters interface {
	// Cluster returns the cluster name, or an error when the snapshot has none by that name.
	Cluster(name string) (Cluster, error)
}
