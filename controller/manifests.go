package controller

import (
	"context"
	"encoding/json"
	"sort"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// manifests remembers the objects provisioning last applied for each Gateway, exactly as the
// provisioner rendered them (its client's Apply calls), for /api/v1/manifests: what the cluster
// should hold for a Gateway, whatever the live objects now say.
type manifests struct {
	mu sync.Mutex
	// byOwner holds the applied objects by owning Gateway UID and "<apiVersion>/<kind> <ns>/<name>".
	byOwner map[types.UID]map[string]map[string]any
}

func newManifests() *manifests { return &manifests{byOwner: map[types.UID]map[string]map[string]any{}} }

// Of returns the objects last applied for the Gateway with uid, sorted by kind, namespace, name.
func (m *manifests) Of(uid types.UID) []map[string]any {
	m.mu.Lock()
	defer m.mu.Unlock()
	keys := make([]string, 0, len(m.byOwner[uid]))
	for k := range m.byOwner[uid] {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]map[string]any, 0, len(keys))
	for _, k := range keys {
		out = append(out, m.byOwner[uid][k])
	}
	return out
}

// wrap returns c recording every Create, Apply and Delete through it.
func (m *manifests) wrap(c client.Client) client.Client { return &recordingClient{Client: c, m: m} }

type recordingClient struct {
	client.Client
	m *manifests
}

func (r *recordingClient) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	if err := r.Client.Apply(ctx, obj, opts...); err != nil {
		return err
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return nil // the object is applied; it only goes unrecorded
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(b); err != nil {
		return nil
	}
	r.record(u)
	return nil
}

// Create records what the provisioner creates: a missing object is created, not applied, so
// that a foreign object of the name makes the create fail rather than being taken over.
func (r *recordingClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	desired, _ := obj.(*unstructured.Unstructured)
	if desired != nil {
		desired = desired.DeepCopy() // as rendered, before the API server fills it in
	}
	if err := r.Client.Create(ctx, obj, opts...); err != nil {
		return err
	}
	if desired != nil {
		r.record(desired)
	}
	return nil
}

// record keeps u under each Gateway that owns it.
func (r *recordingClient) record(u *unstructured.Unstructured) {
	r.m.mu.Lock()
	defer r.m.mu.Unlock()
	for _, o := range u.GetOwnerReferences() {
		if o.Kind != "Gateway" {
			continue
		}
		if r.m.byOwner[o.UID] == nil {
			r.m.byOwner[o.UID] = map[string]map[string]any{}
		}
		r.m.byOwner[o.UID][objectKey(u)] = u.Object
	}
}

func (r *recordingClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	err := r.Client.Delete(ctx, obj, opts...)
	if u, ok := obj.(*unstructured.Unstructured); ok {
		r.m.mu.Lock()
		for _, objs := range r.m.byOwner {
			delete(objs, objectKey(u))
		}
		r.m.mu.Unlock()
	}
	return err
}

func objectKey(u *unstructured.Unstructured) string {
	return u.GetAPIVersion() + "/" + u.GetKind() + " " + u.GetNamespace() + "/" + u.GetName()
}
