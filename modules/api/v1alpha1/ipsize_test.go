package v1alpha1_test

import (
	"testing"

	cxv1a1 "github.com/coxswain-labs/coxswain/modules/api/v1alpha1"
	"github.com/coxswain-labs/coxswain/modules/filters/ipaccess"
	"github.com/coxswain-labs/coxswain/modules/filters/sizelimit"
)

// TestDeepCopyOwnsLists: IpAccessControl's lists are copied, not shared (ipaccess.Config's own
// DeepCopyInto, which the generated code calls).
func TestDeepCopyOwnsLists(t *testing.T) {
	in := &cxv1a1.IpAccessControl{Spec: ipaccess.Config{Deny: []string{"10.0.0.1"}, Allow: []string{"10.0.0.0/8"}}}
	out := in.DeepCopy()
	out.Spec.Deny[0], out.Spec.Allow[0] = "x", "y"
	if in.Spec.Deny[0] != "10.0.0.1" || in.Spec.Allow[0] != "10.0.0.0/8" {
		t.Errorf("the copy shares its lists: %+v", in.Spec)
	}
	if c := (&cxv1a1.IpAccessControl{}).DeepCopy(); c.Spec.Deny != nil || c.Spec.Allow != nil {
		t.Errorf("nil lists copied as %+v", c.Spec)
	}
	rsl := &cxv1a1.RequestSizeLimit{Spec: sizelimit.Config{MaxSize: "1m"}}
	if rsl.DeepCopyObject().(*cxv1a1.RequestSizeLimit).Spec != rsl.Spec {
		t.Error("RequestSizeLimit DeepCopy")
	}
}
