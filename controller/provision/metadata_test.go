package provision

import (
	"maps"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func TestInfrastructureMetadata(t *testing.T) {
	gw := &gwapiv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}, Spec: gwapiv1.GatewaySpec{
		Infrastructure: &gwapiv1.GatewayInfrastructure{
			Labels:      map[gwapiv1.LabelKey]gwapiv1.LabelValue{"team": "a", LabelManagedBy: "someone", LabelGatewayName: "other"},
			Annotations: map[gwapiv1.AnnotationKey]gwapiv1.AnnotationValue{"cost": "1", LabelComponent: "x"},
		},
	}}
	md := InfrastructureMetadata(gw, ComponentGateway)
	want := map[string]string{"team": "a", LabelName: "coxswain", LabelInstance: "web", LabelManagedBy: ManagedBy,
		LabelComponent: ComponentGateway, LabelGatewayName: "web", LabelGatewayNamespace: "ns"}
	if !maps.Equal(md.Labels, want) {
		t.Errorf("labels %v, want %v", md.Labels, want)
	}
	if !maps.Equal(md.Annotations, map[string]string{"cost": "1", LabelComponent: "x"}) {
		t.Errorf("annotations %v", md.Annotations)
	}
	wantDropped := []string{"labels." + LabelManagedBy, "labels." + LabelGatewayName}
	if !slices.Equal(md.Dropped, wantDropped) {
		t.Errorf("dropped %v, want %v", md.Dropped, wantDropped)
	}
	if md.DroppedMessage() == "" {
		t.Error("no message for dropped keys")
	}
}

func TestServiceName(t *testing.T) {
	long := &gwapiv1.Gateway{ObjectMeta: metav1.ObjectMeta{Name: "a-very-long-gateway-name-that-goes-on-and-on-and-on-forever-x"}}
	if n := ServiceName(long); len(n) > 63 {
		t.Errorf("%q: %d characters", n, len(n))
	}
	if n := ServiceName(&gwapiv1.Gateway{ObjectMeta: metav1.ObjectMeta{Name: "web"}}); n != "web-coxswain" {
		t.Errorf("ServiceName = %q", n)
	}
}
