package translation

import (
	"k8s.io/utils/ptr"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// The helpers below do what the API server's CRD defaulting does for the references every route
// kind shares, so that a route read from a file looks like one read from a cluster.

// DefaultParentRefs fills each parentRef's group and kind (a Gateway).
func DefaultParentRefs(refs []gwapiv1.ParentReference) {
	for i := range refs {
		if refs[i].Group == nil {
			refs[i].Group = ptr.To(gwapiv1.Group(gwapiv1.GroupName))
		}
		if refs[i].Kind == nil {
			refs[i].Kind = ptr.To(gwapiv1.Kind("Gateway"))
		}
	}
}

// DefaultBackendObjectRef fills a backend reference's group and kind (a core Service).
func DefaultBackendObjectRef(b *gwapiv1.BackendObjectReference) {
	if b.Group == nil {
		b.Group = ptr.To(gwapiv1.Group(""))
	}
	if b.Kind == nil {
		b.Kind = ptr.To(gwapiv1.Kind("Service"))
	}
}

// DefaultBackendRef defaults a backendRef's reference and its weight (1).
func DefaultBackendRef(ref *gwapiv1.BackendRef) {
	DefaultBackendObjectRef(&ref.BackendObjectReference)
	if ref.Weight == nil {
		ref.Weight = ptr.To[int32](1)
	}
}

// DefaultBackendRefs defaults each of refs (DefaultBackendRef).
func DefaultBackendRefs(refs []gwapiv1.BackendRef) {
	for i := range refs {
		DefaultBackendRef(&refs[i])
	}
}
