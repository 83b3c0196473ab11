package provision

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestPortAllocator(t *testing.T) {
	r := PortRange{First: 20000, Last: 20003}
	a, b, c := types.NamespacedName{Namespace: "n", Name: "a"}, types.NamespacedName{Namespace: "n", Name: "b"}, types.NamespacedName{Namespace: "n", Name: "c"}
	http, https := PortKey{Port: 80, Protocol: corev1.ProtocolTCP}, PortKey{Port: 443, Protocol: corev1.ProtocolTCP}
	dns := PortKey{Port: 53, Protocol: corev1.ProtocolUDP}

	t.Run("distinct ports, stable while held, freed when gone", func(t *testing.T) {
		al := newPortAllocator(r)
		pa := must(t)(al.allocate(a, []PortKey{http, https}))
		pb := must(t)(al.allocate(b, []PortKey{http}))
		if pa[http] == pb[http] || pa[http] == pa[https] {
			t.Fatalf("collision: a %v b %v", pa, pb)
		}
		again := must(t)(al.allocate(a, []PortKey{https, http, dns}))
		if again[http] != pa[http] || again[https] != pa[https] {
			t.Fatalf("a's ports moved: %v then %v", pa, again)
		}
		if _, err := al.allocate(c, []PortKey{http}); err == nil {
			t.Fatal("a full range allocated a fifth port")
		}
		al.release(b)
		if pc := must(t)(al.allocate(c, []PortKey{http})); pc[http] != pb[http] {
			t.Fatalf("c got %d, want b's freed %d", pc[http], pb[http])
		}
	})

	t.Run("seeded from the live Services: a restart keeps every port", func(t *testing.T) {
		al := newPortAllocator(r)
		al.seed(b, service(80, 20002))
		al.seed(a, service(80, 20002)) // a hand-edited duplicate: b keeps it, a gets a fresh one
		al.seed(c, service(80, 40000)) // outside the range: ignored
		pb := must(t)(al.allocate(b, []PortKey{http}))
		pa := must(t)(al.allocate(a, []PortKey{http}))
		pc := must(t)(al.allocate(c, []PortKey{http}))
		if pb[http] != 20002 || pa[http] == 20002 || pc[http] == 20002 || pa[http] == pc[http] {
			t.Fatalf("a %v b %v c %v", pa, pb, pc)
		}
	})
}

func service(port, target int32) *corev1.Service {
	return &corev1.Service{Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: port, TargetPort: intstr.FromInt32(target)}}}}
}

func must(t *testing.T) func(map[PortKey]int32, error) map[PortKey]int32 {
	return func(m map[PortKey]int32, err error) map[PortKey]int32 {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
}

func TestPortRangeValidate(t *testing.T) {
	for _, r := range []PortRange{{First: 80, Last: 90}, {First: 30000, Last: 20000}, {First: 60000, Last: 70000}} {
		if r.Validate() == nil {
			t.Errorf("%v: valid, want an error", r)
		}
	}
	if err := DefaultPortRange.Validate(); err != nil {
		t.Error(err)
	}
}
