package standalone

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwapiv1b1 "sigs.k8s.io/gateway-api/apis/v1beta1"
	k8sjson "sigs.k8s.io/json"

	"github.com/coxswain-labs/coxswain/controller/translator"
)

// object is what every supported kind is: a Kubernetes object with standard metadata.
type object interface {
	metav1.Object
	SetGroupVersionKind(gvk schema.GroupVersionKind)
}

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
}

const (
	gatewayV1       = "gateway.networking.k8s.io/v1"
	gatewayV1beta1  = "gateway.networking.k8s.io/v1beta1"
	gatewayV1alpha2 = "gateway.networking.k8s.io/v1alpha2"
	gatewayV1alpha3 = "gateway.networking.k8s.io/v1alpha3"
)

// kinds lists what a manifest may hold. The v1beta1 Gateway API kinds are the same types under an
// older version; they are accepted so existing manifests load, and stored as v1. So are the
// v1alpha2 TCPRoute, TLSRoute and UDPRoute and the v1alpha3 TLSRoute: their schemas are v1's
// (v1alpha2 allowed more rules, which the translator reports as dropped).
var kinds = []kind{
	{gatewayV1, gatewayV1, "GatewayClass", false, decodeAs[gwapiv1.GatewayClass], func(s *translator.Store, o object) {
		s.GatewayClasses = append(s.GatewayClasses, o.(*gwapiv1.GatewayClass))
	}},
	{gatewayV1beta1, gatewayV1, "GatewayClass", false, decodeAs[gwapiv1.GatewayClass], func(s *translator.Store, o object) {
		s.GatewayClasses = append(s.GatewayClasses, o.(*gwapiv1.GatewayClass))
	}},
	{gatewayV1, gatewayV1, "Gateway", true, decodeAs[gwapiv1.Gateway], func(s *translator.Store, o object) {
		s.Gateways = append(s.Gateways, o.(*gwapiv1.Gateway))
	}},
	{gatewayV1beta1, gatewayV1, "Gateway", true, decodeAs[gwapiv1.Gateway], func(s *translator.Store, o object) {
		s.Gateways = append(s.Gateways, o.(*gwapiv1.Gateway))
	}},
	{gatewayV1, gatewayV1, "HTTPRoute", true, decodeAs[gwapiv1.HTTPRoute], func(s *translator.Store, o object) {
		s.HTTPRoutes = append(s.HTTPRoutes, o.(*gwapiv1.HTTPRoute))
	}},
	{gatewayV1beta1, gatewayV1, "HTTPRoute", true, decodeAs[gwapiv1.HTTPRoute], func(s *translator.Store, o object) {
		s.HTTPRoutes = append(s.HTTPRoutes, o.(*gwapiv1.HTTPRoute))
	}},
	{gatewayV1, gatewayV1, "GRPCRoute", true, decodeAs[gwapiv1.GRPCRoute], func(s *translator.Store, o object) {
		s.GRPCRoutes = append(s.GRPCRoutes, o.(*gwapiv1.GRPCRoute))
	}},
	l4Kind(gatewayV1, "TCPRoute"), l4Kind(gatewayV1alpha2, "TCPRoute"),
	l4Kind(gatewayV1, "TLSRoute"), l4Kind(gatewayV1alpha2, "TLSRoute"), l4Kind(gatewayV1alpha3, "TLSRoute"),
	l4Kind(gatewayV1, "UDPRoute"), l4Kind(gatewayV1alpha2, "UDPRoute"),
	{gatewayV1beta1, gatewayV1beta1, "ReferenceGrant", true, decodeAs[gwapiv1b1.ReferenceGrant], func(s *translator.Store, o object) {
		s.ReferenceGrants = append(s.ReferenceGrants, o.(*gwapiv1b1.ReferenceGrant))
	}},
	{gatewayV1, gatewayV1beta1, "ReferenceGrant", true, decodeAs[gwapiv1b1.ReferenceGrant], func(s *translator.Store, o object) {
		s.ReferenceGrants = append(s.ReferenceGrants, o.(*gwapiv1b1.ReferenceGrant))
	}},
	{"v1", "v1", "Secret", true, decodeAs[corev1.Secret], func(s *translator.Store, o object) {
		s.Secrets = append(s.Secrets, o.(*corev1.Secret))
	}},
	{"v1", "v1", "Service", true, decodeAs[corev1.Service], func(s *translator.Store, o object) {
		s.Services = append(s.Services, o.(*corev1.Service))
	}},
	{"v1", "v1", "Namespace", false, decodeAs[corev1.Namespace], func(s *translator.Store, o object) {
		s.Namespaces = append(s.Namespaces, o.(*corev1.Namespace))
	}},
	{"discovery.k8s.io/v1", "discovery.k8s.io/v1", "EndpointSlice", true, decodeAs[discoveryv1.EndpointSlice], func(s *translator.Store, o object) {
		s.EndpointSlices = append(s.EndpointSlices, o.(*discoveryv1.EndpointSlice))
	}},
}

// l4Kind is the TCPRoute, TLSRoute or UDPRoute kind under apiVersion, stored as v1.
func l4Kind(apiVersion, k string) kind {
	switch k {
	case "TCPRoute":
		return kind{apiVersion, gatewayV1, k, true, decodeAs[gwapiv1.TCPRoute], func(s *translator.Store, o object) {
			s.TCPRoutes = append(s.TCPRoutes, o.(*gwapiv1.TCPRoute))
		}}
	case "TLSRoute":
		return kind{apiVersion, gatewayV1, k, true, decodeAs[gwapiv1.TLSRoute], func(s *translator.Store, o object) {
			s.TLSRoutes = append(s.TLSRoutes, o.(*gwapiv1.TLSRoute))
		}}
	}
	return kind{apiVersion, gatewayV1, k, true, decodeAs[gwapiv1.UDPRoute], func(s *translator.Store, o object) {
		s.UDPRoutes = append(s.UDPRoutes, o.(*gwapiv1.UDPRoute))
	}}
}

// lookupKind finds the kind for an apiVersion and kind.
func lookupKind(apiVersion, k string) (*kind, bool) {
	for i := range kinds {
		if kinds[i].apiVersion == apiVersion && kinds[i].kind == k {
			return &kinds[i], true
		}
	}
	return nil, false
}

// knownKinds lists "apiVersion/kind" for every kind the loader accepts, for error messages.
func knownKinds() string {
	names := make([]string, 0, len(kinds))
	for _, k := range kinds {
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
	var v T
	strict, err := k8sjson.UnmarshalStrict(data, &v)
	if err != nil {
		return nil, nil, err
	}
	return PT(&v), strict, nil
}

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

var typeErrorRE = regexp.MustCompile(`Go struct field [^ .]+\.([^ ]+) of type (\S+)`)

// valueError turns a hard decode error (wrong type, bad base64, bad timestamp) into a loader error,
// naming the field when the message does.
func valueError(src Source, ref ObjectRef, err error) *Error {
	le := &Error{Source: src, Object: ref, Reason: ReasonInvalidValue, Message: err.Error()}
	if m := typeErrorRE.FindStringSubmatch(le.Message); m != nil {
		le.Field = m[1]
	}
	return le
}
