package standalone

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwapiv1b1 "sigs.k8s.io/gateway-api/apis/v1beta1"
	k8sjson "sigs.k8s.io/json"

	"github.com/coxswain-labs/coxswain/controller/translator"
	"github.com/coxswain-labs/coxswain/core"
	infrav1a1 "github.com/coxswain-labs/coxswain/modules/api/infrastructure/v1alpha1"
	policyv1a1 "github.com/coxswain-labs/coxswain/modules/api/policy/v1alpha1"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

// object is what every kind the loader reads is: a Kubernetes object with standard metadata.
type object = translation.Object

// kind is one apiVersion/kind the loader understands: how to decode it and where it goes in the
// Store.
type kind struct {
	apiVersion string
	// stored is the apiVersion the object is stored as (what the Store's Go type is).
	stored     string
	kind       string
	namespaced bool
	decode     func(data []byte) (object, []error, error)
	add        func(s *translator.Store, o object)
	// defaults fills in what the API server would; nil for none.
	defaults func(o object)
}

const (
	gatewayV1      = "gateway.networking.k8s.io/v1"
	gatewayV1beta1 = "gateway.networking.k8s.io/v1beta1"
)

// policyV1alpha1 is the apiVersion of Coxswain's policy kinds.
var policyV1alpha1 = policyv1a1.SchemeGroupVersion.String()

// coreKinds are the kinds the translator's core passes read. The v1beta1 Gateway API kinds are
// the same types under an older version; they are accepted so existing manifests load, and stored
// as v1.
var coreKinds = []kind{
	{gatewayV1, gatewayV1, "GatewayClass", false, decodeAs[gwapiv1.GatewayClass], func(s *translator.Store, o object) {
		s.GatewayClasses = append(s.GatewayClasses, o.(*gwapiv1.GatewayClass))
	}, nil},
	{gatewayV1beta1, gatewayV1, "GatewayClass", false, decodeAs[gwapiv1.GatewayClass], func(s *translator.Store, o object) {
		s.GatewayClasses = append(s.GatewayClasses, o.(*gwapiv1.GatewayClass))
	}, nil},
	{gatewayV1, gatewayV1, "Gateway", true, decodeAs[gwapiv1.Gateway], func(s *translator.Store, o object) {
		s.Gateways = append(s.Gateways, o.(*gwapiv1.Gateway))
	}, applyDefaults},
	{gatewayV1beta1, gatewayV1, "Gateway", true, decodeAs[gwapiv1.Gateway], func(s *translator.Store, o object) {
		s.Gateways = append(s.Gateways, o.(*gwapiv1.Gateway))
	}, applyDefaults},
	{gatewayV1, gatewayV1, "ListenerSet", true, decodeAs[gwapiv1.ListenerSet], func(s *translator.Store, o object) {
		s.ListenerSets = append(s.ListenerSets, o.(*gwapiv1.ListenerSet))
	}, nil},
	{gatewayV1beta1, gatewayV1beta1, "ReferenceGrant", true, decodeAs[gwapiv1b1.ReferenceGrant], func(s *translator.Store, o object) {
		s.ReferenceGrants = append(s.ReferenceGrants, o.(*gwapiv1b1.ReferenceGrant))
	}, nil},
	{gatewayV1, gatewayV1beta1, "ReferenceGrant", true, decodeAs[gwapiv1b1.ReferenceGrant], func(s *translator.Store, o object) {
		s.ReferenceGrants = append(s.ReferenceGrants, o.(*gwapiv1b1.ReferenceGrant))
	}, nil},
	{"v1", "v1", "Secret", true, decodeAs[corev1.Secret], func(s *translator.Store, o object) {
		s.Secrets = append(s.Secrets, o.(*corev1.Secret))
	}, applyDefaults},
	{"v1", "v1", "ConfigMap", true, decodeAs[corev1.ConfigMap], func(s *translator.Store, o object) {
		s.ConfigMaps = append(s.ConfigMaps, o.(*corev1.ConfigMap))
	}, nil},
	{gatewayV1, gatewayV1, translator.BackendTLSPolicyKind, true, decodeAs[gwapiv1.BackendTLSPolicy], func(s *translator.Store, o object) {
		s.BackendTLSPolicies = append(s.BackendTLSPolicies, o.(*gwapiv1.BackendTLSPolicy))
	}, nil},
	{"certificates.k8s.io/v1", "certificates.k8s.io/v1", "ClusterTrustBundle", false, decodeAs[certificatesv1.ClusterTrustBundle], func(s *translator.Store, o object) {
		s.ClusterTrustBundles = append(s.ClusterTrustBundles, o.(*certificatesv1.ClusterTrustBundle))
	}, nil},
	{"v1", "v1", "Service", true, decodeAs[corev1.Service], func(s *translator.Store, o object) {
		s.Services = append(s.Services, o.(*corev1.Service))
	}, applyDefaults},
	{"v1", "v1", "Namespace", false, decodeAs[corev1.Namespace], func(s *translator.Store, o object) {
		s.Namespaces = append(s.Namespaces, o.(*corev1.Namespace))
	}, nil},
	{"discovery.k8s.io/v1", "discovery.k8s.io/v1", "EndpointSlice", true, decodeAs[discoveryv1.EndpointSlice], func(s *translator.Store, o object) {
		s.EndpointSlices = append(s.EndpointSlices, o.(*discoveryv1.EndpointSlice))
	}, applyDefaults},
	{policyV1alpha1, policyV1alpha1, policyv1a1.BackendPolicyKind, true, decodeAs[policyv1a1.CoxswainBackendPolicy], func(s *translator.Store, o object) {
		s.BackendPolicies = append(s.BackendPolicies, o.(*policyv1a1.CoxswainBackendPolicy))
	}, nil},
	{policyV1alpha1, policyV1alpha1, policyv1a1.ClientTrafficPolicyKind, true, decodeAs[policyv1a1.ClientTrafficPolicy], func(s *translator.Store, o object) {
		s.ClientTrafficPolicies = append(s.ClientTrafficPolicies, o.(*policyv1a1.ClientTrafficPolicy))
	}, nil},
	// Read so that a parametersRef resolves as it does in a cluster; standalone mode provisions
	// nothing, so a dedicated Gateway is served by the one in-process proxy.
	{policyV1alpha1, policyV1alpha1, infrav1a1.GatewayParametersKind, true, decodeAs[infrav1a1.CoxswainGatewayParameters], func(s *translator.Store, o object) {
		s.GatewayParameters = append(s.GatewayParameters, o.(*infrav1a1.CoxswainGatewayParameters))
	}, nil},
}

// kindSet is every kind one load reads: the core kinds, each route kind of the registry under
// every version it reads, and the resource of each ExtensionRef filter module.
type kindSet []kind

func kindsOf(reg *core.Registry) kindSet {
	out := append(kindSet(nil), coreKinds...)
	for _, rk := range translation.RouteKinds(reg) {
		out = append(out, routeKinds(rk.API())...)
		if ik, ok := rk.(translation.ImplicitParentKind); ok {
			for _, c := range ik.Companions() {
				out = append(out, companionKind(c))
			}
		}
	}
	exts, _ := reg.Extensions() // a module that declares none is the translator's Problem "InvalidFilterModule"
	for _, api := range exts {
		out = append(out, extensionKind(api))
	}
	return out
}

// routeKinds are the kinds of one route resource, one per version a file may use.
func routeKinds(api translation.RouteAPI) []kind {
	gv := api.GVK.GroupVersion()
	gk := api.GVK.GroupKind()
	decode := func(data []byte) (object, []error, error) { return decodeInto(data, api.New()) }
	k := kind{apiVersion: gv.String(), stored: gv.String(), kind: gk.Kind, namespaced: true, decode: decode,
		add: func(s *translator.Store, o object) { s.Add(gk, o) }, defaults: api.Default}
	out := []kind{k}
	for _, v := range api.ReadVersions {
		k.apiVersion = schema.GroupVersion{Group: gv.Group, Version: v}.String()
		out = append(out, k)
	}
	return out
}

// companionKind is a further resource a route kind reads (IngressClass), typed.
func companionKind(c translation.CompanionAPI) kind {
	gv, gk := c.GVK.GroupVersion().String(), c.GVK.GroupKind()
	return kind{apiVersion: gv, stored: gv, kind: gk.Kind, namespaced: c.Namespaced,
		decode: func(data []byte) (object, []error, error) { return decodeInto(data, c.New()) },
		add:    func(s *translator.Store, o object) { s.Add(gk, o) }}
}

// extensionKind is the resource an ExtensionRef filter module declares, read as an unstructured
// object: what its spec must hold is the module's to say, and the translator checks it the way
// the proxy will decode it, reporting a bad field on the routes that use the object.
func extensionKind(api core.ExtensionAPI) kind {
	gv := schema.GroupVersion{Group: api.Group, Version: api.Version}.String()
	gk := schema.GroupKind{Group: api.Group, Kind: api.Kind}
	return kind{apiVersion: gv, stored: gv, kind: api.Kind, namespaced: true,
		decode: func(data []byte) (object, []error, error) {
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(data); err != nil {
				return nil, nil, err
			}
			return u, nil, nil
		},
		add: func(s *translator.Store, o object) { s.Add(gk, o) }}
}

// lookup finds the kind for an apiVersion and kind.
func (ks kindSet) lookup(apiVersion, k string) (*kind, bool) {
	for i := range ks {
		if ks[i].apiVersion == apiVersion && ks[i].kind == k {
			return &ks[i], true
		}
	}
	return nil, false
}

// names lists "apiVersion kind" for every kind the loader accepts, for error messages.
func (ks kindSet) names() string {
	names := make([]string, 0, len(ks))
	for _, k := range ks {
		names = append(names, k.apiVersion+" "+k.kind)
	}
	sort.Strings(names)
	return strings.Join(names, ", ") + " (and v1 List of these)"
}

// decodeAs decodes JSON strictly into a new T, the way the API server does: field names are
// case-sensitive, unknown and duplicate fields are errors. It returns every strict error, each
// naming its field, and the first hard (type or syntax) error.
func decodeAs[T any, PT interface {
	*T
	object
}](data []byte) (object, []error, error) {
	return decodeInto(data, PT(new(T)))
}

// decodeInto decodes data into o strictly.
func decodeInto(data []byte, o object) (object, []error, error) {
	strict, err := k8sjson.UnmarshalStrict(data, o)
	if err != nil {
		return nil, nil, &decodeError{err: err, path: typeErrorPath(data, o.DeepCopyObject())}
	}
	return o, strict, nil
}

// decodeError is a hard decode error with the JSON path of the value it is about, when known.
type decodeError struct {
	err  error
	path string
}

func (e *decodeError) Error() string { return e.err.Error() }
func (e *decodeError) Unwrap() error { return e.err }

// header is what the loader reads from a document before it knows the kind: enough to name it.
type header struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
}

// readHeader reads apiVersion, kind and metadata leniently; the strict decode reports what is wrong.
func readHeader(data []byte) header {
	var h header
	_ = json.Unmarshal(data, &h)
	return h
}

// fieldErrors turns the errors of a strict decode into loader errors, each naming its field.
func fieldErrors(src Source, ref ObjectRef, strict []error) []*Error {
	out := make([]*Error, 0, len(strict))
	for _, e := range strict {
		le := &Error{Source: src, Object: ref, Reason: ReasonInvalidValue, Message: e.Error()}
		var fe k8sjson.FieldError
		if errors.As(e, &fe) {
			le.Field = fe.FieldPath()
		}
		if strings.HasPrefix(le.Message, "unknown field") {
			le.Reason = ReasonUnknownField
			le.Message = fmt.Sprintf("unknown field %q (not in the %s schema)", le.Field, ref.Kind)
		}
		out = append(out, le)
	}
	return out
}

var (
	typeErrorRE = regexp.MustCompile(`Go struct field [^ .]+\.([^ ]+) of type (\S+)`)
	gotTypeRE   = regexp.MustCompile(`cannot unmarshal (\S+) into`)
)

// goTypeName says a Go type the way a schema would.
func goTypeName(t string) string {
	switch {
	case strings.HasPrefix(t, "[]"):
		return "a list"
	case strings.HasPrefix(t, "map["), strings.Contains(t, "."):
		return "an object (" + t + ")"
	case strings.HasPrefix(t, "int"), strings.HasPrefix(t, "uint"):
		return "an integer"
	case strings.HasPrefix(t, "float"):
		return "a number"
	case t == "bool":
		return "a boolean"
	case t == "string":
		return "a string"
	}
	return t
}

// valueError turns a hard decode error (wrong type, bad base64, bad timestamp) into a loader error,
// naming the field when the message does.
func valueError(src Source, ref ObjectRef, err error) *Error {
	le := &Error{Source: src, Object: ref, Reason: ReasonInvalidValue, Message: err.Error()}
	var de *decodeError
	if m := typeErrorRE.FindStringSubmatch(le.Message); m != nil {
		le.Field = m[1]
		// "json: cannot unmarshal string into Go struct field HTTPBackendRef.spec.rules.backendRefs
		// .BackendRef.BackendObjectReference.port of type int32": say it as the operator wrote it.
		got := "a value"
		if g := gotTypeRE.FindStringSubmatch(le.Message); g != nil {
			got = "a " + g[1]
		}
		le.Message = fmt.Sprintf("wrong type: %s where the %s schema wants %s", got, ref.Kind, goTypeName(m[2]))
	}
	if errors.As(err, &de) && de.path != "" {
		le.Field = de.path
	}
	return le
}
