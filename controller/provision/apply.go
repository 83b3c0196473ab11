package provision

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// ObjectKey names one provisioned object.
type ObjectKey struct {
	GVK       schema.GroupVersionKind
	Namespace string
	Name      string
}

func (k ObjectKey) String() string { return k.GVK.Kind + " " + k.Namespace + "/" + k.Name }

// Kind is the object's kind.
func (k ObjectKey) Kind() string { return k.GVK.Kind }

// Conflict is a desired object whose name is taken by an object the Gateway does not own: it is
// left alone and reported.
type Conflict struct {
	Key   ObjectKey
	Owner string // who owns it instead, for the message ("" for nobody)
}

func (c Conflict) Error() string {
	if c.Owner == "" {
		return fmt.Sprintf("%s exists and is not owned by this Gateway; delete it or rename the Gateway", c.Key)
	}
	return fmt.Sprintf("%s exists and is owned by %s, not by this Gateway; delete it or rename the Gateway", c.Key, c.Owner)
}

// Rejected is a desired object the API server refused (an invalid clusterIP, a quota).
type Rejected struct {
	Key ObjectKey
	Err error
}

func (r Rejected) Error() string {
	return fmt.Sprintf("%s was rejected by the API server: %v", r.Key, r.Err)
}

// Result is what applying one Gateway's objects did.
type Result struct {
	Live      map[ObjectKey]client.Object // the objects as the API server returned them
	Conflicts []Conflict
	Rejected  []Rejected
	// Err is a failure worth retrying (the API server unreachable); nil when every object was
	// applied, conflicted or rejected.
	Err error
}

// Applier reconciles the objects a Gateway owns: it server-side applies each desired object
// (field manager "coxswain") with the Gateway as its controlling owner, so that deleting the
// Gateway deletes them (garbage collection); repairs drift when the live object is not the one
// it last applied; refuses to touch an object of the same name it does not own; and prunes
// objects it applied before that are no longer desired.
//
// It remembers, per object, the resourceVersion it last wrote and the hash of what it wrote:
// while the cached live object (Live) still has that resourceVersion nothing is sent, so steady
// state costs no API calls. Objects of kinds without a Live lookup are re-applied only when their
// desired content changes.
type Applier struct {
	c      client.Client
	scheme *runtime.Scheme
	// Live looks up the cached live object of a key; nil, or (nil, false), when it is not cached
	// (then the applier asks the API server).
	Live func(ObjectKey) (client.Object, bool)

	mu      sync.Mutex
	applied map[types.UID]map[ObjectKey]record // by owner Gateway
}

type record struct {
	rv, hash string
	// rejected is the hash of a desired object the API server refused, and why: not sent again
	// until the desired object changes.
	rejected, why string
}

// NewApplier builds an applier on c, whose scheme must know every kind it is handed.
func NewApplier(c client.Client) *Applier {
	return &Applier{c: c, scheme: c.Scheme(), applied: map[types.UID]map[ObjectKey]record{}}
}

// Apply makes owner's objects the desired ones: each is applied (or left alone when unchanged),
// and the objects applied for owner before that are not desired any more are deleted.
func (a *Applier) Apply(ctx context.Context, owner *gwapiv1.Gateway, desired []client.Object) Result {
	res := Result{Live: map[ObjectKey]client.Object{}}
	a.mu.Lock()
	prev := a.applied[owner.UID]
	a.mu.Unlock()
	next := map[ObjectKey]record{}
	var errs []error
	for _, obj := range desired {
		key, u, hash, err := a.prepare(owner, obj)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		rec := prev[key]
		if rec.rejected == hash {
			next[key] = rec
			res.Rejected = append(res.Rejected, Rejected{Key: key, Err: errors.New(rec.why)})
			continue
		}
		if live, ok := a.live(key); ok && rec.hash == hash && live.GetResourceVersion() == rec.rv {
			next[key] = rec
			res.Live[key] = live
			continue
		}
		live, err := a.applyOne(ctx, owner, key, u)
		var conflict *Conflict
		switch {
		case errors.As(err, &conflict):
			res.Conflicts = append(res.Conflicts, *conflict)
		case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
			// Sending it again cannot help; a Forbidden (RBAC still being installed) can.
			res.Rejected = append(res.Rejected, Rejected{Key: key, Err: err})
			next[key] = record{rejected: hash, why: err.Error()}
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %w", key, err))
			if rec.hash != "" {
				next[key] = rec // still ours: prune it if it stops being desired
			}
		default:
			next[key] = record{rv: live.GetResourceVersion(), hash: hash}
			res.Live[key] = live
		}
	}
	for key, rec := range prev {
		if _, keep := next[key]; keep || rec.hash == "" {
			continue
		}
		if err := a.prune(ctx, owner, key); err != nil {
			errs = append(errs, err)
			next[key] = rec
		}
	}
	a.mu.Lock()
	a.applied[owner.UID] = next
	a.mu.Unlock()
	res.Err = errors.Join(errs...)
	return res
}

// Adopt tells the applier that a live object it finds (after a restart or a failover) was
// applied for owner, so that it is pruned when no longer desired.
func (a *Applier) Adopt(owner types.UID, key ObjectKey) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.applied[owner] == nil {
		a.applied[owner] = map[ObjectKey]record{}
	}
	if _, ok := a.applied[owner][key]; !ok {
		a.applied[owner][key] = record{hash: "adopted"}
	}
}

// Forget drops what the applier remembers of a Gateway that is gone (its objects are the
// garbage collector's).
func (a *Applier) Forget(owner types.UID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.applied, owner)
}

func (a *Applier) live(key ObjectKey) (client.Object, bool) {
	if a.Live == nil {
		return nil, false
	}
	return a.Live(key)
}

// prepare sets the owner reference and turns obj into the apply request.
func (a *Applier) prepare(owner *gwapiv1.Gateway, obj client.Object) (ObjectKey, *unstructured.Unstructured, string, error) {
	gvk, err := apiutil.GVKForObject(obj, a.scheme)
	if err != nil {
		return ObjectKey{}, nil, "", fmt.Errorf("provisioned object %s: %w", obj.GetName(), err)
	}
	key := ObjectKey{GVK: gvk, Namespace: obj.GetNamespace(), Name: obj.GetName()}
	if key.Namespace != owner.Namespace {
		return key, nil, "", fmt.Errorf("%s: provisioned objects live in their Gateway's namespace %s", key, owner.Namespace)
	}
	obj = obj.DeepCopyObject().(client.Object)
	obj.SetOwnerReferences([]metav1.OwnerReference{ownerRef(owner)})
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return key, nil, "", fmt.Errorf("%s: %w", key, err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	delete(u.Object, "status") // never ours to write here
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	b, err := json.Marshal(u.Object)
	if err != nil {
		return key, nil, "", fmt.Errorf("%s: %w", key, err)
	}
	sum := sha256.Sum256(b)
	return key, u, hex.EncodeToString(sum[:]), nil
}

func ownerRef(gw *gwapiv1.Gateway) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion: gwapiv1.GroupVersion.String(), Kind: "Gateway", Name: gw.Name, UID: gw.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}
}

// applyOne applies one object after checking that what holds its name, if anything, is ours.
func (a *Applier) applyOne(ctx context.Context, owner *gwapiv1.Gateway, key ObjectKey, u *unstructured.Unstructured) (client.Object, error) {
	cur := &unstructured.Unstructured{}
	cur.SetGroupVersionKind(key.GVK)
	err := a.c.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: key.Name}, cur)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return nil, err
	default:
		if !ownedBy(cur, owner.UID) {
			return nil, &Conflict{Key: key, Owner: controllerOf(cur)}
		}
		if recreate(key, cur, u) {
			// A field that cannot change in place (a Service's clusterIP): the object is made anew.
			if err := a.c.Delete(ctx, cur, client.Preconditions{UID: ptr.To(cur.GetUID())}); err != nil && !apierrors.IsNotFound(err) {
				return nil, err
			}
		}
	}
	if err := a.c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		return nil, err
	}
	return u, nil
}

// recreate reports whether applying u over cur needs cur deleted first: a Service's spec.clusterIP
// is immutable once allocated.
func recreate(key ObjectKey, cur, u *unstructured.Unstructured) bool {
	if key.GVK.Group != "" || key.GVK.Kind != "Service" {
		return false
	}
	want, _, _ := unstructured.NestedString(u.Object, "spec", "clusterIP")
	have, _, _ := unstructured.NestedString(cur.Object, "spec", "clusterIP")
	return want != "" && have != "" && want != have
}

// prune deletes an object applied for owner before, if it is still owner's.
func (a *Applier) prune(ctx context.Context, owner *gwapiv1.Gateway, key ObjectKey) error {
	cur := &unstructured.Unstructured{}
	cur.SetGroupVersionKind(key.GVK)
	err := a.c.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: key.Name}, cur)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("pruning %s: %w", key, err)
	}
	if !ownedBy(cur, owner.UID) {
		return nil
	}
	if err := a.c.Delete(ctx, cur, client.Preconditions{UID: ptr.To(cur.GetUID())}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("pruning %s: %w", key, err)
	}
	return nil
}

func ownedBy(obj metav1.Object, uid types.UID) bool {
	for _, r := range obj.GetOwnerReferences() {
		if r.UID == uid && r.Controller != nil && *r.Controller {
			return true
		}
	}
	return false
}

func controllerOf(obj metav1.Object) string {
	for _, r := range obj.GetOwnerReferences() {
		if r.Controller != nil && *r.Controller {
			return r.Kind + " " + r.Name
		}
	}
	return ""
}
