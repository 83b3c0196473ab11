package translator

import (
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/modules/translation"
)

// filterBackends is translation.FilterBackends for the filters of one route: a filter's backend
// (RequestMirror's) is judged exactly as the route's backendRefs are (ReferenceGrants from the
// route's kind, its cluster protocol), and its cluster is kept in the snapshot although no route
// backend names it.
type filterBackends struct{ rc *routeContext }

var _ translation.FilterBackends = filterBackends{}

func (b filterBackends) Backend(field string, ref gwapiv1.BackendObjectReference) (string, bool) {
	rc := b.rc
	name, err := rc.t.resolveBackend(rc.st.key, ref, clusterProtocol(rc.st.kind), rc.emit, rc.ls, nil)
	if err != nil {
		rc.Unresolved(field, err.reason, "%s", err.msg)
		return "", false
	}
	if rc.emit {
		rc.t.filterClusters[name] = true
		rc.t.recordFilterCluster(name)
	}
	return name, true
}

// routeLabel is the route object as the proxy's per-route metrics name it
// ("HTTPRoute/<namespace>/<name>", what an IR route's name starts with).
func routeLabel(k RouteKey) string { return k.Kind + "/" + k.Namespace + "/" + k.Name }
