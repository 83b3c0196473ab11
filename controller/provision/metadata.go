package provision

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// The labels every provisioned object carries. The first five are the GEP-1762 keys a Gateway's
// spec.infrastructure cannot override; LabelGatewayNamespace lets the controller find a
// Gateway's objects (a label value holds no "/", so namespace and name are two labels).
const (
	LabelName             = "app.kubernetes.io/name"
	LabelInstance         = "app.kubernetes.io/instance"
	LabelManagedBy        = "app.kubernetes.io/managed-by"
	LabelComponent        = "app.kubernetes.io/component"
	LabelGatewayName      = "gateway.networking.k8s.io/gateway-name"
	LabelGatewayNamespace = "coxswain-labs.dev/gateway-namespace"

	// ManagedBy is the app.kubernetes.io/managed-by value of every object the controller owns.
	ManagedBy = "coxswain"
	// FieldManager is the server-side apply field manager of the controller's writes.
	FieldManager = "coxswain"
)

// reserved are the keys spec.infrastructure.labels and .annotations may not set (GEP-1762).
var reserved = []string{LabelName, LabelInstance, LabelManagedBy, LabelComponent, LabelGatewayName}

// Metadata is what a provisioned object's labels and annotations are for one Gateway.
type Metadata struct {
	Labels      map[string]string
	Annotations map[string]string
	// Dropped are the spec.infrastructure keys that were not applied because they are reserved,
	// as "labels.<key>" or "annotations.<key>", sorted.
	Dropped []string
}

// InfrastructureMetadata is the metadata of an object provisioned for gw in the given component
// ("gateway" for the shared mode's VIP Service and ServiceAccount, "proxy" for a dedicated pool's
// pods, ...): the Gateway's spec.infrastructure.labels and .annotations (GEP-1867) over the
// reserved GEP-1762 labels, which always win. The dedicated mode renders its objects with it.
func InfrastructureMetadata(gw *gwapiv1.Gateway, component string) Metadata {
	m := Metadata{Labels: map[string]string{}, Annotations: map[string]string{}}
	if inf := gw.Spec.Infrastructure; inf != nil {
		for k, v := range inf.Labels {
			m.Labels[string(k)] = string(v)
		}
		for k, v := range inf.Annotations {
			m.Annotations[string(k)] = string(v)
		}
	}
	for _, k := range reserved {
		if _, ok := m.Labels[k]; ok {
			m.Dropped = append(m.Dropped, "labels."+k)
		}
		if _, ok := m.Annotations[k]; ok {
			m.Dropped = append(m.Dropped, "annotations."+k)
			delete(m.Annotations, k)
		}
	}
	maps.Copy(m.Labels, OwnLabels(gw, component))
	slices.Sort(m.Dropped)
	return m
}

// OwnLabels are the labels that mark an object as provisioned for gw; the reconciler selects its
// objects by them.
func OwnLabels(gw *gwapiv1.Gateway, component string) map[string]string {
	return map[string]string{
		LabelName:             "coxswain",
		LabelInstance:         gw.Name,
		LabelManagedBy:        ManagedBy,
		LabelComponent:        component,
		LabelGatewayName:      gw.Name,
		LabelGatewayNamespace: gw.Namespace,
	}
}

// DroppedMessage says, for a condition message, which reserved keys were ignored; "" for none.
func (m Metadata) DroppedMessage() string {
	if len(m.Dropped) == 0 {
		return ""
	}
	return fmt.Sprintf("spec.infrastructure sets reserved keys, which were not applied: %s", strings.Join(m.Dropped, ", "))
}
