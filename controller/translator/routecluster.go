package translator

import (
	"fmt"
	"time"

	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

// routeClusterMarker begins the part of a cluster name that says a route's own settings
// ("default/echo:80/with=lb=least_conn,connect=2000ms"); no Service name can hold it.
const routeClusterMarker = "/with="

// routeCluster is what a route asks of the clusters of its backends itself
// (translation.ClusterSettings, an Ingress's annotations), once checked against the Service's
// CoxswainBackendPolicy: only the settings the policy leaves unset. A cluster with them is a
// variant of the Service port's, named by suffix, so that the routes without them keep theirs.
type routeCluster struct {
	connectMS uint32
	balancer  *irv1.ModuleConfig
	suffix    string
}

// routeClusterFor checks s for the backend ref of rc's route: an algorithm that cannot be served
// is warned about and dropped, and so is each setting the policy on the Service makes. Nil when
// nothing is left.
func (rc *routeContext) routeClusterFor(ref gwapiv1.BackendObjectReference, s translation.ClusterSettings) *routeCluster {
	if s.IsZero() {
		return nil
	}
	var out routeCluster
	alg := ""
	if s.Algorithm != "" && s.Algorithm != "round_robin" {
		mc, why := rc.t.balancer(s.Algorithm)
		if why != "" {
			rc.Warn(s.AlgorithmField, "%s; round robin is used", why)
		} else {
			out.balancer, alg = mc, s.Algorithm
		}
	}
	out.connectMS = s.ConnectTimeoutMs
	ns := rc.st.key.Namespace
	if ref.Namespace != nil && *ref.Namespace != "" {
		ns = string(*ref.Namespace)
	}
	if p := rc.t.servicePolicies[nn(ns, string(ref.Name))]; p != nil {
		if out.balancer != nil && p.settings.balancer != nil {
			rc.Warn(s.AlgorithmField, "%s sets the load balancer of Service %s/%s; its algorithm applies, not %q", p.key, ns, ref.Name, alg)
			out.balancer, alg = nil, ""
		}
		if out.connectMS != 0 && p.settings.connectMS != 0 {
			rc.Warn(s.ConnectTimeoutField, "%s sets the connect timeout of Service %s/%s (%s); it applies, not %s", p.key, ns, ref.Name,
				time.Duration(p.settings.connectMS)*time.Millisecond, time.Duration(out.connectMS)*time.Millisecond)
			out.connectMS = 0
		}
	}
	if alg != "" {
		out.suffix = "lb=" + alg
	}
	if out.connectMS != 0 {
		if out.suffix != "" {
			out.suffix += ","
		}
		out.suffix += fmt.Sprintf("connect=%dms", out.connectMS)
	}
	if out.suffix == "" {
		return nil
	}
	out.suffix = routeClusterMarker[1:] + out.suffix
	return &out
}

// apply sets the route's settings on a new cluster, after the Service's policy (which leaves
// them unset, routeClusterFor).
func (rcl *routeCluster) apply(c *irv1.Cluster) {
	if rcl == nil {
		return
	}
	if rcl.connectMS != 0 {
		c.ConnectTimeoutMs = rcl.connectMS
	}
	if rcl.balancer != nil {
		c.Balancer = rcl.balancer
	}
}
