package integration

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/test/integration/env"
)

var pathRewriteRegexGVR = schema.GroupVersionResource{Group: "gateway.coxswain-labs.dev", Version: "v1alpha1", Resource: "pathrewriteregexes"}

// TestPathRewriteRegexFilter: a PathRewriteRegex object in the cluster rewrites its rule's path;
// an edit to it takes effect without a restart; a pattern that passes the CRD but does not
// compile fails the rule (500, ResolvedRefs=False UnsupportedValue); a deleted object fails
// open (served unrewritten, FilterNotFound).
func TestPathRewriteRegexFilter(t *testing.T) {
	e := env.Start(t)
	startController(t, e, controllerOpts{})
	ns := namespace(t, e, "rewrite", nil)
	const port, host = 18950, "rewrite.example"
	startBackend(t, "rw1", "10.99.75.1:8080")
	createClass(t, e, "rewrite", "")
	createGateway(t, e, ns, "gw", "rewrite", httpListener("http", port))
	createService(t, e, ns, "svc", "10.99.75.1")
	createFilterObject(t, e, pathRewriteRegexGVR, "PathRewriteRegex", ns, "rw", map[string]any{
		"pattern": `^/old/(\w+)$`, "substitution": "/new/$1"})
	rule := prefixRule("/old", backendRef("svc", 1))
	rule.Filters = extRef("PathRewriteRegex", "rw")
	createRoute(t, e, httpRoute(ns, "web", []gwapiv1.ParentReference{parentRef(ns, "gw")}, []string{host}, rule))

	backendSees := func(path, want string) {
		t.Helper()
		eventually(t, fmt.Sprintf("GET %s reaches the backend as %s", path, want), func() error {
			r, err := get(port, host, path)
			if err != nil {
				return err
			}
			if r.status != 200 || strings.TrimSpace(r.body) != "rw1 "+want {
				return fmt.Errorf("got %d %q", r.status, r.body)
			}
			return nil
		})
	}
	backendSees("/old/users", "/new/users")

	updateSpec(t, e, pathRewriteRegexGVR, ns, "rw", map[string]any{"pattern": `^/old/(\w+)$`, "substitution": "/v2/$1"})
	backendSees("/old/users", "/v2/users")

	updateSpec(t, e, pathRewriteRegexGVR, ns, "rw", map[string]any{"pattern": `^/old/(`, "substitution": "/x"})
	served(t, port, host, "/old/users", 500, "")
	routeResolvedRefs(t, e, ns, "web", "UnsupportedValue")

	if err := e.Dynamic.Resource(pathRewriteRegexGVR).Namespace(ns).Delete(ctxFor(t), "rw", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	backendSees("/old/users", "/old/users")
	routeResolvedRefs(t, e, ns, "web", "FilterNotFound")
}
