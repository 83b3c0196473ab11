package integration

import (
	"context"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/coxswain-labs/coxswain/controller/discovery"
	"github.com/coxswain-labs/coxswain/core/discovery/svid"
	"github.com/coxswain-labs/coxswain/test/integration/env"
)

const proxySA = "system:serviceaccount:" + controllerNS + ":coxswain-proxy"

// deployDiscoveryRBAC runs the controller's discovery set-up as its service account with the
// manifests' RBAC (applied by TestDeployManifests): the CA Secret is created and read back, the
// trust bundle published, a proxy token reviewed; and the proxy's service account may do nothing.
func deployDiscoveryRBAC(t *testing.T, e *env.Env) {
	cfg := rest.CopyConfig(e.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: controllerSA}
	kube := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	ca, err := discovery.EnsureCA(ctx, kube, controllerNS, "coxswain-discovery-ca", "cluster.local")
	if err != nil {
		t.Fatalf("creating the CA as the controller: %v", err)
	}
	if again, err := discovery.EnsureCA(ctx, kube, controllerNS, "coxswain-discovery-ca", "cluster.local"); err != nil ||
		string(again.Bundle()) != string(ca.Bundle()) {
		t.Fatalf("a second replica reads another CA (%v)", err)
	}
	for range 2 { // create, then update in place
		if err := discovery.PublishBundle(ctx, kube, controllerNS, "coxswain-discovery-trust-bundle", ca.Bundle()); err != nil {
			t.Fatalf("publishing the trust bundle as the controller: %v", err)
		}
	}
	token := serviceAccountToken(t, e, controllerNS, "coxswain-proxy", svid.Audience)
	ns, sa, err := discovery.TokenReviewAuthenticator(kube, svid.Audience)(ctx, token)
	if err != nil || ns != controllerNS || sa != "coxswain-proxy" {
		t.Fatalf("TokenReview as the controller: %s/%s, %v", ns, sa, err)
	}

	type access struct {
		user, ns, group, resource, name, verb string
		allowed                               bool
	}
	checks := []access{
		{controllerSA, "", "authentication.k8s.io", "tokenreviews", "", "create", true},
		{controllerSA, controllerNS, "", "secrets", "coxswain-discovery-ca", "get", true},
		{controllerSA, controllerNS, "", "secrets", "coxswain-discovery-ca", "update", false},
		{controllerSA, "default", "", "secrets", "", "create", false},
		{controllerSA, controllerNS, "", "configmaps", "coxswain-discovery-trust-bundle", "update", true},
		// ConfigMaps may be read and written anywhere: the dedicated mode copies the trust bundle
		// into each dedicated Gateway's namespace (docs/dedicated.md).
		{controllerSA, "default", "", "configmaps", "", "create", true},
		{controllerSA, controllerNS, "", "secrets", "other", "update", false},
	}
	for _, verb := range []string{"get", "list", "watch", "create"} {
		for _, r := range []string{"configmaps", "secrets", "pods", "serviceaccounts"} {
			checks = append(checks, access{proxySA, controllerNS, "", r, "", verb, false})
		}
	}
	checks = append(checks, access{proxySA, "", "authentication.k8s.io", "tokenreviews", "", "create", false},
		access{proxySA, "", "gateway.networking.k8s.io", "gateways", "", "list", false})
	for _, c := range checks {
		sar, err := e.Kube.AuthorizationV1().SubjectAccessReviews().Create(ctxFor(t), &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: c.user,
				Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + controllerNS, "system:authenticated"},
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: c.ns, Group: c.group, Resource: c.resource,
					Name: c.name, Verb: c.verb}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if sar.Status.Allowed != c.allowed {
			t.Errorf("%s: %s %s/%s %q in %q: allowed=%v, want %v", c.user, c.verb, c.group, c.resource, c.name, c.ns, sar.Status.Allowed, c.allowed)
		}
	}
}
