package translate_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwapiv1b1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/coxswain-labs/coxswain/controller/translator"
	"github.com/coxswain-labs/coxswain/controller/translator/translatortest"
	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/modules/filters/basicauth"
	basictranslate "github.com/coxswain-labs/coxswain/modules/filters/basicauth/translate"
	_ "github.com/coxswain-labs/coxswain/modules/grpcroute"
	_ "github.com/coxswain-labs/coxswain/modules/grpcroute/translate"
	_ "github.com/coxswain-labs/coxswain/modules/httproute"
	_ "github.com/coxswain-labs/coxswain/modules/httproute/translate"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

var basicAuthGK = schema.GroupKind{Group: "gateway.coxswain-labs.dev", Kind: "BasicAuth"}

const shaSecret = "{SHA}5en6G6MezRroT3XKqkdPOmY/BfQ=" // "secret"

func basicAuthObject(ns, name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.coxswain-labs.dev/v1alpha1", "kind": "BasicAuth",
		"metadata": map[string]any{"namespace": ns, "name": name}, "spec": spec}}
}

func secret(ns, name string, labelled bool, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + ns + name)}, Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{}}
	if labelled {
		s.Labels = map[string]string{basicauth.SecretLabel: "true"}
	}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

// storeWith is translatortest's one-route store (HTTPRoute bench/route-0, rules /a and /b)
// whose rule 0 references the BasicAuth bench/auth.
func storeWith(objs ...any) *translator.Store {
	s := translatortest.SyntheticStore(1)
	r := s.Objects[translatortest.HTTPRoute][0].(*gwapiv1.HTTPRoute)
	r.Spec.Rules[0].Filters = []gwapiv1.HTTPRouteFilter{{Type: gwapiv1.HTTPRouteFilterExtensionRef,
		ExtensionRef: &gwapiv1.LocalObjectReference{Group: "gateway.coxswain-labs.dev", Kind: "BasicAuth", Name: "auth"}}}
	for _, o := range objs {
		switch o := o.(type) {
		case *corev1.Secret:
			s.Secrets = append(s.Secrets, o)
		case *gwapiv1b1.ReferenceGrant:
			s.ReferenceGrants = append(s.ReferenceGrants, o)
		case *unstructured.Unstructured:
			s.Add(basicAuthGK, o)
		}
	}
	return s
}

// outcome is what a translation made of rule 0.
type outcome struct {
	res      *translator.Result
	route    *irv1.Route
	config   *basicauth.Config // nil: no BasicAuth filter on the rule
	resolved metav1.Condition
}

func translate(t *testing.T, s *translator.Store) outcome {
	t.Helper()
	res := translator.Translate(context.Background(), s, translator.Options{Registry: core.Freeze()})
	var o outcome
	o.res = res
	for _, l := range res.Snapshot.Listeners {
		for _, srv := range l.Servers {
			for _, vh := range srv.VirtualHosts {
				for _, r := range vh.Routes {
					if strings.Contains(string(r.Match.GetJson()), `"/a"`) {
						o.route = r
					}
				}
			}
		}
	}
	if o.route == nil {
		t.Fatalf("no route for rule 0 in %v", res.Snapshot)
	}
	for _, f := range o.route.Filters {
		if f.Id == basicauth.ModuleID {
			o.config = new(basicauth.Config)
			if err := core.DecodeStrict(f.Json, o.config); err != nil {
				t.Fatalf("config %s: %v", f.Json, err)
			}
		}
	}
	st := res.Routes.Get(translator.RouteKey{Group: gwapiv1.GroupName, Kind: "HTTPRoute", Namespace: "bench", Name: "route-0"})
	for _, c := range st.Parents[0].Conditions {
		if c.Type == string(gwapiv1.RouteConditionResolvedRefs) {
			o.resolved = c
		}
	}
	return o
}

func (o outcome) served(t *testing.T) {
	t.Helper()
	if len(o.route.Backends) != 1 || o.route.Backends[0].Error != "" || o.route.Backends[0].Cluster == "" {
		t.Errorf("backends %v: want the rule served", o.route.Backends)
	}
}

func TestResolve(t *testing.T) {
	h, err := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	file := "alice:" + string(h) + "\nbob:$apr1$abc$def\ndave:" + shaSecret + "\n"
	ref := map[string]any{"secretRef": map[string]any{"name": "htpasswd"}}
	o := translate(t, storeWith(basicAuthObject("bench", "auth", ref), secret("bench", "htpasswd", true, map[string]string{"auth": file})))
	o.served(t)
	if o.config == nil || o.config.Closed != "" || o.config.Realm != "bench/auth" || len(o.config.Users) != 2 ||
		o.config.Users[0].Name != "alice" || o.config.Users[1].Hash != shaSecret {
		t.Fatalf("config %+v: want alice and dave, realm bench/auth", o.config)
	}
	if o.resolved.Status != metav1.ConditionTrue {
		t.Errorf("ResolvedRefs %+v, want True", o.resolved)
	}
	var warnings []string
	for _, w := range o.res.Warnings {
		warnings = append(warnings, w.Message)
	}
	joined := strings.Join(warnings, "\n")
	for _, want := range []string{`Secret bench/htpasswd: line 2: user "bob": MD5 (apr1) hashes are not supported`, `user "dave" has a {SHA} hash`} {
		if !strings.Contains(joined, want) || !strings.Contains(o.resolved.Message, want) {
			t.Errorf("warnings %q and ResolvedRefs message %q: want %q in both", warnings, o.resolved.Message, want)
		}
	}
	if strings.Contains(joined, string(h)) {
		t.Error("a warning shows a hash")
	}
}

func TestResolveOptions(t *testing.T) {
	spec := map[string]any{"secretRef": map[string]any{"name": "htpasswd", "namespace": "bench"}, "realm": "Admin area", "forwardCredentials": true}
	o := translate(t, storeWith(basicAuthObject("bench", "auth", spec), secret("bench", "htpasswd", true, map[string]string{"auth": "dave:" + shaSecret})))
	if o.config == nil || o.config.Realm != "Admin area" || !o.config.ForwardCredentials {
		t.Errorf("config %+v: want the realm and forwardCredentials of the spec", o.config)
	}
}

// TestResolveFailsClosed: a Secret that cannot be used serves the rule with a closed config
// (503) and says why in ResolvedRefs.
func TestResolveFailsClosed(t *testing.T) {
	ref := func(ns string) map[string]any {
		return map[string]any{"secretRef": map[string]any{"name": "htpasswd", "namespace": ns}}
	}
	good := map[string]string{"auth": "dave:" + shaSecret}
	grant := &gwapiv1b1.ReferenceGrant{ObjectMeta: metav1.ObjectMeta{Namespace: "vault", Name: "g"},
		Spec: gwapiv1b1.ReferenceGrantSpec{
			From: []gwapiv1b1.ReferenceGrantFrom{{Group: "gateway.coxswain-labs.dev", Kind: "BasicAuth", Namespace: "bench"}},
			To:   []gwapiv1b1.ReferenceGrantTo{{Group: "", Kind: "Secret"}},
		}}
	otherKindGrant := grant.DeepCopy()
	otherKindGrant.Spec.From[0].Kind = "JwtAuth"
	for _, tc := range []struct {
		name    string
		objs    []any
		reason  string
		message string
	}{
		{"missing", []any{basicAuthObject("bench", "auth", ref(""))}, "SecretNotFound",
			`Secret bench/htpasswd does not exist (a Secret for BasicAuth needs the label ingress.coxswain-labs.dev/auth-basic: "true")`},
		{"unlabelled", []any{basicAuthObject("bench", "auth", ref("")), secret("bench", "htpasswd", false, good)}, "InvalidSecret",
			`Secret bench/htpasswd does not have the label ingress.coxswain-labs.dev/auth-basic: "true"`},
		{"no auth key", []any{basicAuthObject("bench", "auth", ref("")), secret("bench", "htpasswd", true, map[string]string{"users": "x"})}, "InvalidSecret",
			`Secret bench/htpasswd has no key "auth"`},
		{"no usable line", []any{basicAuthObject("bench", "auth", ref("")), secret("bench", "htpasswd", true, map[string]string{"auth": "bob:$apr1$a$b\n"})}, "InvalidSecret",
			`has no usable htpasswd entry`},
		{"other namespace without a grant", []any{basicAuthObject("bench", "auth", ref("vault")), secret("vault", "htpasswd", true, good)}, "RefNotPermitted",
			"Secret vault/htpasswd is in another namespace and no ReferenceGrant lets BasicAuth objects of bench refer to it"},
		{"a grant for another kind", []any{basicAuthObject("bench", "auth", ref("vault")), secret("vault", "htpasswd", true, good), otherKindGrant}, "RefNotPermitted", "no ReferenceGrant"},
		{"other namespace with a grant", []any{basicAuthObject("bench", "auth", ref("vault")), secret("vault", "htpasswd", true, good), grant}, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := translate(t, storeWith(tc.objs...))
			o.served(t)
			if o.config == nil {
				t.Fatalf("no BasicAuth config on the rule (filters %v)", o.route.Filters)
			}
			if tc.reason == "" {
				if o.config.Closed != "" || len(o.config.Users) != 1 || o.resolved.Status != metav1.ConditionTrue {
					t.Errorf("config %+v, ResolvedRefs %+v: want the user and True", o.config, o.resolved)
				}
				return
			}
			if !strings.Contains(o.config.Closed, tc.message) || len(o.config.Users) != 0 {
				t.Errorf("config %+v: want closed with %q", o.config, tc.message)
			}
			if o.resolved.Status != metav1.ConditionFalse || o.resolved.Reason != tc.reason ||
				!strings.Contains(o.resolved.Message, "ExtensionRef BasicAuth.gateway.coxswain-labs.dev auth: ") ||
				!strings.Contains(o.resolved.Message, tc.message) || !strings.Contains(o.resolved.Message, "answered 503") {
				t.Errorf("ResolvedRefs %+v: want False %s naming the ExtensionRef, %q and the 503", o.resolved, tc.reason, tc.message)
			}
		})
	}
}

// TestResolveInvalid: an object the API server would have refused fails its rule (500), as
// every invalid filter object does; a missing BasicAuth fails open.
func TestResolveInvalid(t *testing.T) {
	good := secret("bench", "htpasswd", true, map[string]string{"auth": "dave:" + shaSecret})
	for _, tc := range []struct {
		name string
		spec map[string]any
		want string
	}{
		{"unknown field", map[string]any{"secretRef": map[string]any{"name": "htpasswd"}, "users": "x"}, `unknown field "users"`},
		{"no secret name", map[string]any{"secretRef": map[string]any{}}, "secretRef.name is required"},
		{"quote in realm", map[string]any{"secretRef": map[string]any{"name": "htpasswd"}, "realm": `a"b`}, "quotes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := translate(t, storeWith(basicAuthObject("bench", "auth", tc.spec), good))
			if o.config != nil || len(o.route.Backends) != 1 || o.route.Backends[0].Error == "" {
				t.Errorf("filters %v backends %v: want the rule failed", o.route.Filters, o.route.Backends)
			}
			if o.resolved.Reason != "UnsupportedValue" || !strings.Contains(o.resolved.Message, tc.want) {
				t.Errorf("ResolvedRefs %+v: want UnsupportedValue with %q", o.resolved, tc.want)
			}
		})
	}
	t.Run("missing object", func(t *testing.T) {
		o := translate(t, storeWith(good))
		o.served(t)
		if o.config != nil || o.resolved.Reason != "FilterNotFound" {
			t.Errorf("config %+v ResolvedRefs %+v: want no filter and FilterNotFound", o.config, o.resolved)
		}
	})
}

// TestGRPCRouteRefused: Basic authentication is for HTTPRoute rules; a GRPCRoute rule that
// references it fails with a condition.
func TestGRPCRouteRefused(t *testing.T) {
	s := storeWith(basicAuthObject("bench", "auth", map[string]any{"secretRef": map[string]any{"name": "htpasswd"}}))
	port := gwapiv1.PortNumber(8080)
	s.Add(translatortest.GRPCRoute, &gwapiv1.GRPCRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: "grpc", Generation: 1},
		Spec: gwapiv1.GRPCRouteSpec{
			CommonRouteSpec: gwapiv1.CommonRouteSpec{ParentRefs: []gwapiv1.ParentReference{{Name: "gw"}}},
			Hostnames:       []gwapiv1.Hostname{"grpc.example.com"},
			Rules: []gwapiv1.GRPCRouteRule{{
				Filters: []gwapiv1.GRPCRouteFilter{{Type: gwapiv1.GRPCRouteFilterExtensionRef,
					ExtensionRef: &gwapiv1.LocalObjectReference{Group: "gateway.coxswain-labs.dev", Kind: "BasicAuth", Name: "auth"}}},
				BackendRefs: []gwapiv1.GRPCBackendRef{{BackendRef: gwapiv1.BackendRef{
					BackendObjectReference: gwapiv1.BackendObjectReference{Name: "backend", Port: &port}}}},
			}},
		},
	})
	res := translator.Translate(context.Background(), s, translator.Options{Registry: core.Freeze()})
	for _, p := range res.Problems {
		if p.Kind == "GRPCRoute" && p.Reason == "UnsupportedValue" && strings.Contains(p.Message, "BasicAuth filters are not supported on GRPCRoute") {
			return
		}
	}
	raw, _ := json.Marshal(res.Problems)
	t.Errorf("problems %s: want the GRPCRoute's BasicAuth refused", raw)
}

func TestSecretLabelSelector(t *testing.T) {
	var r translation.SecretSelector = basictranslate.Resolver{}
	if got := r.SecretLabelSelector(); got != "ingress.coxswain-labs.dev/auth-basic=true" {
		t.Errorf("selector %q", got)
	}
	if _, ok := core.Freeze().Lookup(basictranslate.ModuleID); !ok || basictranslate.ModuleID != "translate.filter.ext.gateway.coxswain-labs.dev.BasicAuth" {
		t.Errorf("resolver %s is not registered", basictranslate.ModuleID)
	}
}
