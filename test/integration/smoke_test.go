package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwconsts "sigs.k8s.io/gateway-api/pkg/consts"

	"github.com/coxswain-labs/coxswain/test/integration/env"
)

// wantBundleVersion is the Gateway API release the tests pin. It must match
// the conformance suite's consts.BundleVersion, which refuses other CRDs.
const wantBundleVersion = "v1.7.0"

// TestSmoke proves the integration environment is a real API server: the
// Gateway API objects a controller reads round-trip through etcd, CRD
// defaults are applied, and CRD validation rejects bad input.
func TestSmoke(t *testing.T) {
	e := env.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	t.Run("crd bundle version", func(t *testing.T) { checkCRDs(ctx, t, e) })

	ns := "smoke"
	mustCreate(t, "Namespace", func() error {
		_, err := e.Kube.CoreV1().Namespaces().Create(ctx,
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		return err
	})
	createGatewayAPI(ctx, t, e, ns)
	createBackend(ctx, t, e, ns)

	t.Run("read back", func(t *testing.T) { readBack(ctx, t, e, ns) })
	t.Run("validation", func(t *testing.T) { rejectsInvalid(ctx, t, e, ns) })
}

func checkCRDs(ctx context.Context, t *testing.T, e *env.Env) {
	if gwconsts.BundleVersion != wantBundleVersion {
		t.Errorf("go.mod has gateway-api %s, tests pin %s", gwconsts.BundleVersion, wantBundleVersion)
	}
	for _, name := range []string{"gatewayclasses", "gateways", "httproutes", "grpcroutes", "referencegrants"} {
		name += "." + gwapiv1.GroupName
		u, err := e.Dynamic.Resource(apiextensionsv1.SchemeGroupVersion.WithResource("customresourcedefinitions")).
			Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("CRD %s: %v", name, err)
			continue
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &crd); err != nil {
			t.Fatalf("decoding CRD %s: %v", name, err)
		}
		if got := crd.Annotations[gwconsts.BundleVersionAnnotation]; got != wantBundleVersion {
			t.Errorf("CRD %s: %s = %q, want %q", name, gwconsts.BundleVersionAnnotation, got, wantBundleVersion)
		}
		if got := crd.Annotations[gwconsts.ChannelAnnotation]; got != "standard" {
			t.Errorf("CRD %s: channel = %q, want standard", name, got)
		}
		if !appliedBy(crd.ManagedFields, env.FieldManager) {
			t.Errorf("CRD %s: not server-side applied by %s: %+v", name, env.FieldManager, crd.ManagedFields)
		}
	}
}

func appliedBy(fields []metav1.ManagedFieldsEntry, manager string) bool {
	for _, f := range fields {
		if f.Manager == manager && f.Operation == metav1.ManagedFieldsOperationApply {
			return true
		}
	}
	return false
}

func createGatewayAPI(ctx context.Context, t *testing.T, e *env.Env, ns string) {
	t.Helper()
	gw := e.Gateway.GatewayV1()
	mustCreate(t, "GatewayClass", func() error {
		_, err := gw.GatewayClasses().Create(ctx, &gwapiv1.GatewayClass{
			ObjectMeta: metav1.ObjectMeta{Name: "coxswain-smoke"},
			Spec:       gwapiv1.GatewayClassSpec{ControllerName: "coxswain-labs.dev/gateway-controller"},
		}, metav1.CreateOptions{})
		return err
	})
	mustCreate(t, "Gateway", func() error {
		_, err := gw.Gateways(ns).Create(ctx, &gwapiv1.Gateway{
			ObjectMeta: metav1.ObjectMeta{Name: "gw"},
			Spec: gwapiv1.GatewaySpec{
				GatewayClassName: "coxswain-smoke",
				Listeners:        []gwapiv1.Listener{{Name: "http", Port: 80, Protocol: gwapiv1.HTTPProtocolType}},
			},
		}, metav1.CreateOptions{})
		return err
	})
	mustCreate(t, "HTTPRoute", func() error {
		_, err := gw.HTTPRoutes(ns).Create(ctx, &gwapiv1.HTTPRoute{
			ObjectMeta: metav1.ObjectMeta{Name: "route"},
			Spec: gwapiv1.HTTPRouteSpec{
				CommonRouteSpec: gwapiv1.CommonRouteSpec{ParentRefs: []gwapiv1.ParentReference{{Name: "gw"}}},
				Hostnames:       []gwapiv1.Hostname{"smoke.example.com"},
				// No Matches: the CRD's default (PathPrefix "/") must be filled in.
				Rules: []gwapiv1.HTTPRouteRule{{BackendRefs: []gwapiv1.HTTPBackendRef{{
					BackendRef: gwapiv1.BackendRef{BackendObjectReference: gwapiv1.BackendObjectReference{
						Name: "backend", Port: ptr.To[gwapiv1.PortNumber](8080),
					}},
				}}}},
			},
		}, metav1.CreateOptions{})
		return err
	})
}

// createBackend makes a selector-less Service with a hand-written
// EndpointSlice. The address is never dialled; it only has to be one the API
// server accepts (it rejects loopback and link-local endpoint addresses).
func createBackend(ctx context.Context, t *testing.T, e *env.Env, ns string) {
	t.Helper()
	mustCreate(t, "Service", func() error {
		_, err := e.Kube.CoreV1().Services(ns).Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "backend"},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{
				Name: "http", Port: 8080, TargetPort: intstr.FromInt32(3000), Protocol: corev1.ProtocolTCP,
			}}},
		}, metav1.CreateOptions{})
		return err
	})
	mustCreate(t, "EndpointSlice", func() error {
		_, err := e.Kube.DiscoveryV1().EndpointSlices(ns).Create(ctx, &discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{
				Name:   "backend-1",
				Labels: map[string]string{discoveryv1.LabelServiceName: "backend"},
			},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints: []discoveryv1.Endpoint{{
				Addresses:  []string{"10.0.0.1"},
				Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			}},
			Ports: []discoveryv1.EndpointPort{{
				Name: ptr.To("http"), Port: ptr.To[int32](3000), Protocol: ptr.To(corev1.ProtocolTCP),
			}},
		}, metav1.CreateOptions{})
		return err
	})
}

func readBack(ctx context.Context, t *testing.T, e *env.Env, ns string) {
	gw := e.Gateway.GatewayV1()
	gc, err := gw.GatewayClasses().Get(ctx, "coxswain-smoke", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get GatewayClass: %v", err)
	}
	if gc.Spec.ControllerName != "coxswain-labs.dev/gateway-controller" {
		t.Errorf("GatewayClass controllerName = %q", gc.Spec.ControllerName)
	}
	g, err := gw.Gateways(ns).Get(ctx, "gw", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get Gateway: %v", err)
	}
	if len(g.Spec.Listeners) != 1 || g.Spec.Listeners[0].Port != 80 {
		t.Errorf("Gateway listeners = %+v", g.Spec.Listeners)
	}
	// Status defaults come from the CRD schema: proof it is the real one.
	if len(g.Status.Conditions) == 0 {
		t.Errorf("Gateway status has no default conditions; CRD defaulting did not run")
	}
	r, err := gw.HTTPRoutes(ns).Get(ctx, "route", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get HTTPRoute: %v", err)
	}
	if got := r.Spec.Rules[0].Matches; len(got) != 1 || got[0].Path == nil ||
		*got[0].Path.Type != gwapiv1.PathMatchPathPrefix || *got[0].Path.Value != "/" {
		t.Errorf("HTTPRoute matches = %+v, want the CRD default PathPrefix /", got)
	}
	if got := r.Spec.Rules[0].BackendRefs[0]; got.Kind == nil || *got.Kind != "Service" {
		t.Errorf("HTTPRoute backendRef kind = %v, want defaulted Service", got.Kind)
	}
	svc, err := e.Kube.CoreV1().Services(ns).Get(ctx, "backend", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get Service: %v", err)
	}
	if svc.Spec.ClusterIP == "" {
		t.Errorf("Service got no ClusterIP")
	}
	es, err := e.Kube.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{
		LabelSelector: discoveryv1.LabelServiceName + "=backend",
	})
	if err != nil {
		t.Fatalf("list EndpointSlices: %v", err)
	}
	if len(es.Items) != 1 || es.Items[0].Endpoints[0].Addresses[0] != "10.0.0.1" {
		t.Errorf("EndpointSlices = %+v", es.Items)
	}
}

func rejectsInvalid(ctx context.Context, t *testing.T, e *env.Env, ns string) {
	tests := []struct {
		name  string
		route gwapiv1.HTTPRouteSpec
		want  string
	}{
		{
			name: "path prefix without leading slash",
			route: gwapiv1.HTTPRouteSpec{Rules: []gwapiv1.HTTPRouteRule{{Matches: []gwapiv1.HTTPRouteMatch{{
				Path: &gwapiv1.HTTPPathMatch{Type: ptr.To(gwapiv1.PathMatchPathPrefix), Value: ptr.To("no-slash")},
			}}}}},
			want: "must be an absolute path",
		},
		{
			name: "two redirect filters (CEL)",
			route: gwapiv1.HTTPRouteSpec{Rules: []gwapiv1.HTTPRouteRule{{Filters: []gwapiv1.HTTPRouteFilter{
				{Type: gwapiv1.HTTPRouteFilterRequestRedirect, RequestRedirect: &gwapiv1.HTTPRequestRedirectFilter{}},
				{Type: gwapiv1.HTTPRouteFilterRequestRedirect, RequestRedirect: &gwapiv1.HTTPRequestRedirectFilter{}},
			}}}},
			want: "RequestRedirect filter cannot be repeated",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.Gateway.GatewayV1().HTTPRoutes(ns).Create(ctx, &gwapiv1.HTTPRoute{
				ObjectMeta: metav1.ObjectMeta{GenerateName: "invalid-"},
				Spec:       tc.route,
			}, metav1.CreateOptions{})
			if !apierrors.IsInvalid(err) {
				t.Fatalf("create: err = %v, want Invalid", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("create: err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

func mustCreate(t *testing.T, kind string, create func() error) {
	t.Helper()
	if err := create(); err != nil {
		t.Fatalf("create %s: %v", kind, err)
	}
}
