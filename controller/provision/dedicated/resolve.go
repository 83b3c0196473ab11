package dedicated

import (
	"fmt"

	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	infrav1a1 "github.com/coxswain-labs/coxswain/modules/api/infrastructure/v1alpha1"
)

// Lookup finds a CoxswainGatewayParameters by namespace and name.
type Lookup func(namespace, name string) (*infrav1a1.CoxswainGatewayParameters, bool)

// ParamsError is a parametersRef that cannot be used: the field that holds it and why. The
// Gateway (or GatewayClass) gets Accepted=False reason InvalidParameters with Error() as message.
type ParamsError struct {
	Field, Message string
}

func (e *ParamsError) Error() string { return e.Field + ": " + e.Message }

// ResolveGateway returns the CoxswainGatewayParameters gw runs with: its own
// spec.infrastructure.parametersRef (in its namespace), else its class's spec.parametersRef.
// nil and no error: neither is set, the Gateway is served by the shared pool.
func ResolveGateway(gw *gwapiv1.Gateway, class *gwapiv1.GatewayClass, get Lookup) (*infrav1a1.CoxswainGatewayParameters, error) {
	if inf := gw.Spec.Infrastructure; inf != nil && inf.ParametersRef != nil {
		r := inf.ParametersRef
		return resolve("spec.infrastructure.parametersRef", string(r.Group), string(r.Kind), gw.Namespace, r.Name, get)
	}
	if class == nil || class.Spec.ParametersRef == nil {
		return nil, nil
	}
	p, err := ResolveClass(class, get)
	if err != nil {
		return nil, &ParamsError{Field: "spec.infrastructure", Message: fmt.Sprintf("GatewayClass %s: %v", class.Name, err)}
	}
	return p, nil
}

// ResolveClass returns the CoxswainGatewayParameters a GatewayClass's spec.parametersRef names;
// nil and no error when it names none.
func ResolveClass(class *gwapiv1.GatewayClass, get Lookup) (*infrav1a1.CoxswainGatewayParameters, error) {
	r := class.Spec.ParametersRef
	if r == nil {
		return nil, nil
	}
	const field = "spec.parametersRef"
	if r.Namespace == nil || *r.Namespace == "" {
		if string(r.Group) == infrav1a1.GroupName && string(r.Kind) == infrav1a1.GatewayParametersKind {
			return nil, &ParamsError{Field: field + ".namespace", Message: infrav1a1.GatewayParametersKind + " is namespaced: the namespace is required"}
		}
	}
	ns := ""
	if r.Namespace != nil {
		ns = string(*r.Namespace)
	}
	return resolve(field, string(r.Group), string(r.Kind), ns, r.Name, get)
}

func resolve(field, group, kind, ns, name string, get Lookup) (*infrav1a1.CoxswainGatewayParameters, error) {
	if group != infrav1a1.GroupName || kind != infrav1a1.GatewayParametersKind {
		gk := kind
		if group != "" {
			gk = kind + "." + group
		}
		return nil, &ParamsError{Field: field, Message: fmt.Sprintf("%s %s: only %s.%s is supported", gk, name, infrav1a1.GatewayParametersKind, infrav1a1.GroupName)}
	}
	p, ok := get(ns, name)
	if !ok {
		return nil, &ParamsError{Field: field, Message: fmt.Sprintf("%s %s/%s not found", kind, ns, name)}
	}
	if err := Validate(&p.Spec); err != nil {
		return nil, &ParamsError{Field: field, Message: fmt.Sprintf("%s %s/%s is invalid: %v", kind, ns, name, err)}
	}
	return p, nil
}
