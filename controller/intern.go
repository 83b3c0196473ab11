package controller

import (
	"reflect"
	"unique"

	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// Route status strings, shared. Every cached route carries the status the controller wrote:
// per parent the controller's name, the parent's group, kind and name, and two or three
// conditions' type, status, reason and message, decoded from JSON into strings of their own,
// the same few values in each of 20,000 routes. internRouteStatus makes each such string the
// one canonical copy (unique.Make: held weakly, so a value no object uses any more is freed).
// Only these fields: a field whose values are per object (names, UIDs, resource versions) would
// gain an entry in unique's map per object and cost more than it saves (docs/controller.md).

// internRouteStatus interns the status strings of obj when it is a route object (any kind
// whose status embeds a gwapiv1.RouteStatus), and its spec's parent references; other objects
// are left as they are.
func internRouteStatus(obj any) {
	for i, refs := 0, routeParentRefsOf(obj); i < len(refs); i++ {
		internParentRef(&refs[i])
	}
	parents := routeParentsOf(obj)
	for i := range parents {
		p := &parents[i]
		p.ControllerName = gwapiv1.GatewayController(intern(string(p.ControllerName)))
		internParentRef(&p.ParentRef)
		for j := range p.Conditions {
			c := &p.Conditions[j]
			c.Type, c.Reason, c.Message = intern(c.Type), intern(c.Reason), intern(c.Message)
			c.Status = internAs(c.Status)
		}
	}
}

func internParentRef(r *gwapiv1.ParentReference) {
	if r.Group != nil {
		*r.Group = internAs(*r.Group)
	}
	if r.Kind != nil {
		*r.Kind = internAs(*r.Kind)
	}
	if r.Namespace != nil {
		*r.Namespace = internAs(*r.Namespace)
	}
	r.Name = internAs(r.Name)
	if r.SectionName != nil {
		*r.SectionName = internAs(*r.SectionName)
	}
}

// routeParentsOf is the status parents of a route object, nil for other objects: route kinds
// are modules' types, and each keeps its status as Status.RouteStatus.Parents.
func routeParentsOf(obj any) []gwapiv1.RouteParentStatus {
	st := structField(reflect.ValueOf(obj), "Status")
	if !st.IsValid() {
		return nil
	}
	rs := st.FieldByName("RouteStatus")
	if !rs.IsValid() || rs.Type() != reflect.TypeFor[gwapiv1.RouteStatus]() {
		return nil
	}
	return rs.Addr().Interface().(*gwapiv1.RouteStatus).Parents
}

// routeParentRefsOf is the spec's parent references of a route object (every kind embeds a
// gwapiv1.CommonRouteSpec), nil for other objects.
func routeParentRefsOf(obj any) []gwapiv1.ParentReference {
	spec := structField(reflect.ValueOf(obj), "Spec")
	if !spec.IsValid() {
		return nil
	}
	common := spec.FieldByName("CommonRouteSpec")
	if !common.IsValid() || common.Type() != reflect.TypeFor[gwapiv1.CommonRouteSpec]() {
		return nil
	}
	return common.Addr().Interface().(*gwapiv1.CommonRouteSpec).ParentRefs
}

// structField is field name of the struct v points to; invalid when there is none.
func structField(v reflect.Value, name string) reflect.Value {
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return reflect.Value{}
	}
	f := v.Elem().FieldByName(name)
	if f.Kind() != reflect.Struct || !f.CanAddr() {
		return reflect.Value{}
	}
	return f
}

func intern(s string) string {
	if s == "" {
		return s
	}
	return unique.Make(s).Value()
}

func internAs[S ~string](s S) S { return S(intern(string(s))) }
