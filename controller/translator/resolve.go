package translator

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

// resolveContext is what an ExtensionResolver reads: the store, with ReferenceGrants applied for
// the filter object that makes the reference.
type resolveContext struct {
	t         *session
	namespace string
	from      schema.GroupKind
	// rc and field are the route and the ExtensionRef being resolved, for Warn and Unresolved.
	rc    *routeContext
	field string
	what  string // "ExtensionRef <Kind>.<group> <name>", the prefix of its messages
}

var _ translation.ResolveContext = (*resolveContext)(nil)

func (rc *resolveContext) Namespace() string { return rc.namespace }

func (rc *resolveContext) Backend(ref gwapiv1.BackendObjectReference, h2c bool) (string, error) {
	proto := irv1.Cluster_HTTP1
	if h2c {
		proto = irv1.Cluster_H2C
	}
	// The filter object is the referrer: its group and kind are what a ReferenceGrant names.
	from := RouteKey{Group: rc.from.Group, Kind: rc.from.Kind, Namespace: rc.namespace}
	var l *listenerState
	if rc.rc != nil {
		l = rc.rc.ls
	}
	name, berr := rc.t.resolveBackend(from, ref, proto, true, l, nil)
	if berr != nil {
		return "", translation.Fail("", berr.reason, "%s", berr.msg) // the route shows its reason
	}
	if rc.rc != nil && rc.rc.emit {
		rc.t.filterClusters[name] = true // no route backend names it: keep it in the snapshot
		rc.t.recordFilterCluster(name)
	}
	return name, nil
}

func (rc *resolveContext) Document(uri string, refresh time.Duration) ([]byte, error) {
	rc.t.notReplayable() // a document may change while the Store does not
	if rc.t.opts.Documents == nil {
		return nil, fmt.Errorf("remote documents are not fetched in this process (%s)", uri)
	}
	// One translation sees one answer per URI: a fetch that completes half-way through (between
	// the validation pass and a listener's build) must not give a route a status from before it
	// and a config from after it. The next translation sees the new body.
	if d, ok := rc.t.documents[uri]; ok {
		return d.body, d.err
	}
	body, err := rc.t.opts.Documents.Document(uri, refresh)
	rc.t.documents[uri] = document{body, err}
	return body, err
}

// document is one answer of translator.Options.Documents, kept for the rest of the translation.
type document struct {
	body []byte
	err  error
}

func (rc *resolveContext) Warn(format string, args ...any) {
	rc.rc.Warn(rc.field, "%s: %s", rc.what, fmt.Sprintf(format, args...))
}

func (rc *resolveContext) Unresolved(reason gwapiv1.RouteConditionReason, format string, args ...any) {
	rc.rc.Unresolved(rc.field, reason, "%s: %s", rc.what, fmt.Sprintf(format, args...))
}

func (rc *resolveContext) Secret(namespace, name string) (*corev1.Secret, error) {
	if namespace == "" {
		namespace = rc.namespace
	}
	if namespace != rc.namespace && !rc.t.granted(rc.from.Group, rc.from.Kind, rc.namespace, "", "Secret", namespace, name) {
		return nil, translation.Fail("", gwapiv1.RouteReasonRefNotPermitted,
			"Secret %s/%s is in another namespace and no ReferenceGrant lets %s objects of %s refer to it", namespace, name, rc.from.Kind, rc.namespace)
	}
	sec := rc.t.secrets[nn(namespace, name)]
	if sec == nil {
		return nil, translation.Fail("", translation.RouteReasonSecretNotFound, "Secret %s/%s does not exist", namespace, name)
	}
	return sec, nil
}
