package provision

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/csaupgrade"
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
	// Fresh: refused by this Apply (not a refusal remembered from an earlier one), for a caller
	// that reports each refusal once.
	Fresh bool
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
	// Live looks up the cached live object of a key: cached says the kind is cached at all (when
	// not, the applier asks the API server, which needs get on the kind), found whether the
	// object is in the cache. A cache may hold only the controller's own objects (labelled): an
	// object not found is then created, never applied over, so a foreign one is not taken.
	Live func(ObjectKey) (obj client.Object, found, cached bool)

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
		if live, ok, _ := a.live(key); ok && rec.hash == hash && live.GetResourceVersion() == rec.rv {
			next[key] = rec
			res.Live[key] = live
			continue
		}
		live, err := a.applyOne(ctx, owner, key, u)
		var conflict *Conflict
		switch {
		case apierrors.IsAlreadyExists(err) && rec.rv != "":
			// Ours, made a moment ago, and not in the cache yet.
			next[key] = rec
		case apierrors.IsAlreadyExists(err):
			res.Conflicts = append(res.Conflicts, Conflict{Key: key})
		case errors.As(err, &conflict):
			res.Conflicts = append(res.Conflicts, *conflict)
		case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
			// Sending it again cannot help; a Forbidden (RBAC still being installed) can.
			res.Rejected = append(res.Rejected, Rejected{Key: key, Err: err, Fresh: true})
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

func (a *Applier) live(key ObjectKey) (client.Object, bool, bool) {
	if a.Live == nil {
		return nil, false, false
	}
	return a.Live(key)
}

// current is the live object of key, from the cache when the kind is cached, else from the API
// server; nil when there is none.
func (a *Applier) current(ctx context.Context, key ObjectKey) (metav1.Object, error) {
	if obj, found, cached := a.live(key); cached {
		if !found {
			return nil, nil
		}
		return obj, nil
	}
	cur := &unstructured.Unstructured{}
	cur.SetGroupVersionKind(key.GVK)
	err := a.c.Get(ctx, client.ObjectKey{Namespace: key.Namespace, Name: key.Name}, cur)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return cur, nil
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

// applyOne applies one object after checking that what holds its name, if anything, is ours. An
// object that does not exist is created (a POST fails on a foreign object the cache did not
// show, where an apply would take it over); an existing one of ours is applied with force, which
// repairs every field it sets.
func (a *Applier) applyOne(ctx context.Context, owner *gwapiv1.Gateway, key ObjectKey, u *unstructured.Unstructured) (client.Object, error) {
	cur, err := a.current(ctx, key)
	if err != nil {
		return nil, err
	}
	if cur == nil {
		if err := a.c.Create(ctx, u, client.FieldOwner(FieldManager)); err != nil {
			return u, err
		}
		_, err := a.ownAsApplier(ctx, u)
		return u, err
	}
	if !ownedBy(cur, owner.UID) {
		return nil, &Conflict{Key: key, Owner: controllerOf(cur)}
	}
	if recreate(key, cur, u) {
		// A field that cannot change in place (a Service's clusterIP): the object is made anew.
		if err := a.c.Delete(ctx, u.DeepCopy(), client.Preconditions{UID: ptr.To(cur.GetUID())}); err != nil && !apierrors.IsNotFound(err) {
			return nil, err
		}
		if err := a.c.Create(ctx, u, client.FieldOwner(FieldManager)); err != nil {
			return u, err
		}
		_, err := a.ownAsApplier(ctx, u)
		return u, err
	}
	if strayServiceSelector(key, cur, u) {
		// An apply repairs the fields it sets, and a selector-less Service sets none: a selector
		// someone added (which would make Kubernetes publish endpoints of its own next to the
		// controller's) is removed by name.
		patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"selector":null}}`))
		if err := a.c.Patch(ctx, u.DeepCopy(), patch); err != nil {
			return nil, err
		}
	}
	sent := u.DeepCopy()
	if err := a.c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		return nil, err
	}
	if moved, err := a.ownAsApplier(ctx, u); err != nil || !moved {
		return u, err
	}
	// An object made by an earlier controller, whose created fields were not the applier's until
	// now: apply again, which drops the ones no longer desired.
	u = sent
	if err := a.c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldManager), client.ForceOwnership); err != nil {
		return nil, err
	}
	return u, nil
}

// ownAsApplier moves the fields a create gave field manager "coxswain" (as an Update) to its
// server-side apply entry (client-go's csaupgrade). Without it a later apply that leaves a field
// out — a Service port whose listener went, the UDP port of HTTP/3 turned off — does not remove
// it: server-side apply removes only the fields the applier owns, and a create's are another
// entry's. live is the object as the API server returned it (with its managedFields); it is
// updated with the patch's result. moved says whether there was anything to move.
func (a *Applier) ownAsApplier(ctx context.Context, live *unstructured.Unstructured) (bool, error) {
	patch, err := csaupgrade.UpgradeManagedFieldsPatch(live, sets.New(FieldManager), FieldManager)
	if err != nil || patch == nil {
		return false, err
	}
	if err := a.c.Patch(ctx, live, client.RawPatch(types.JSONPatchType, patch)); err != nil {
		return false, fmt.Errorf("taking over the fields %s was created with: %w", live.GetName(), err)
	}
	return true, nil
}

// strayServiceSelector reports whether u is a Service without a selector (a VIP Service, whose
// endpoints the controller writes) while cur has one.
func strayServiceSelector(key ObjectKey, cur metav1.Object, u *unstructured.Unstructured) bool {
	if key.GVK.Group != "" || key.GVK.Kind != "Service" {
		return false
	}
	if _, found, _ := unstructured.NestedMap(u.Object, "spec", "selector"); found {
		return false
	}
	switch c := cur.(type) {
	case *corev1.Service:
		return len(c.Spec.Selector) > 0
	case *unstructured.Unstructured:
		sel, _, _ := unstructured.NestedMap(c.Object, "spec", "selector")
		return len(sel) > 0
	}
	return false
}

// recreate reports whether applying u over cur needs cur deleted first: a Service's spec.clusterIP
// is immutable once allocated.
func recreate(key ObjectKey, cur metav1.Object, u *unstructured.Unstructured) bool {
	if key.GVK.Group != "" || key.GVK.Kind != "Service" {
		return false
	}
	want, _, _ := unstructured.NestedString(u.Object, "spec", "clusterIP")
	var have string
	switch c := cur.(type) {
	case *corev1.Service:
		have = c.Spec.ClusterIP
	case *unstructured.Unstructured:
		have, _, _ = unstructured.NestedString(c.Object, "spec", "clusterIP")
	}
	return want != "" && have != "" && want != have
}

// prune deletes an object applied for owner before, if it is still owner's.
func (a *Applier) prune(ctx context.Context, owner *gwapiv1.Gateway, key ObjectKey) error {
	cur, err := a.current(ctx, key)
	if err != nil {
		return fmt.Errorf("pruning %s: %w", key, err)
	}
	if cur == nil || !ownedBy(cur, owner.UID) {
		return nil
	}
	del := &unstructured.Unstructured{}
	del.SetGroupVersionKind(key.GVK)
	del.SetNamespace(key.Namespace)
	del.SetName(key.Name)
	if err := a.c.Delete(ctx, del, client.Preconditions{UID: ptr.To(cur.GetUID())}); err != nil && !apierrors.IsNotFound(err) {
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

func controllerUID(obj metav1.Object) types.UID {
	for _, r := range obj.GetOwnerReferences() {
		if r.Controller != nil && *r.Controller {
			return r.UID
		}
	}
	return ""
}

func controllerOf(obj metav1.Object) string {
	for _, r := range obj.GetOwnerReferences() {
		if r.Controller != nil && *r.Controller {
			return r.Kind + " " + r.Name
		}
	}
	return ""
}
