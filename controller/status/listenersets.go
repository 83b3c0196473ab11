package status

import (
	"context"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwclientset "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// ListenerSetKind is the kind of the ListenerSets whose status the writer owns.
const ListenerSetKind Kind = "ListenerSet"

// listenerSetPrefix starts the snapshot name of a ListenerSet's gate entry
// (translator.ListenerSetGatewayName): the data plane reports its generation as it does a
// Gateway's, under this name in the ListenerSet's namespace.
const listenerSetPrefix = "ListenerSet:"

// ListenerSets is the writer's access to ListenerSets: the informer's cache (which exists only
// once the resource is served) and the typed client.
type ListenerSets struct {
	Indexer cache.Indexer
	Client  gwclientset.Interface
}

// gateKey maps a snapshot gate entry to the object whose status it gates: a Gateway, or a
// ListenerSet (listenerSetPrefix).
func gateKey(g *irv1.GatewayGeneration) Key {
	name := g.GetName()
	if ls, ok := strings.CutPrefix(name, listenerSetPrefix); ok {
		return Key{ListenerSetKind, types.NamespacedName{Namespace: g.GetNamespace(), Name: ls}}
	}
	return Key{GatewayKind, types.NamespacedName{Namespace: g.GetNamespace(), Name: name}}
}

// syncListenerSet writes a ListenerSet's status: the translator's, with Programmed held back on
// the set and on each listener until the data plane has bound and acknowledged its generation,
// and listeners proxies cannot bind marked, exactly as for a Gateway (gatewayStatus).
func (w *Writer) syncListenerSet(ctx context.Context, key Key) error {
	ls := w.opts.ListenerSets
	w.mu.Lock()
	desired, applied, awaiting, unbound := w.listenerSets[key.NamespacedName], w.applied[gateNN(key)], w.awaiting[gateNN(key)], w.unbound[gateNN(key)]
	w.mu.Unlock()
	if desired == nil || ls == nil || ls.Indexer == nil {
		return nil
	}
	o, ok, err := ls.Indexer.GetByKey(key.Namespace + "/" + key.Name)
	if err != nil || !ok {
		return err
	}
	cached, ok := o.(*gwapiv1.ListenerSet)
	if !ok {
		return nil
	}
	client := ls.Client.GatewayV1().ListenerSets(key.Namespace)
	g := gate{Generation: generationOf(desired.Conditions), Applied: applied, Unbound: unbound, Now: w.opts.Now()}
	if awaiting.generation == g.Generation {
		g.Awaiting = awaiting.what
	}
	return w.count(update(ctx, cached,
		func(ctx context.Context) (*gwapiv1.ListenerSet, error) {
			return client.Get(ctx, key.Name, metav1.GetOptions{})
		},
		func(live *gwapiv1.ListenerSet) (*gwapiv1.ListenerSet, bool) {
			st := listenerSetStatus(live.Status, desired, g)
			if Equal(live.Status, st) {
				return nil, false
			}
			out := *live // a shallow copy: the cached object is never modified
			out.Status = st
			return &out, true
		},
		func(ctx context.Context, obj *gwapiv1.ListenerSet) error {
			_, err := client.UpdateStatus(ctx, obj, metav1.UpdateOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		}))
}

// gateNN is the name the gate state of key is recorded under (Applied, Pending, Unbound).
func gateNN(key Key) types.NamespacedName {
	if key.Kind == ListenerSetKind {
		return types.NamespacedName{Namespace: key.Namespace, Name: listenerSetPrefix + key.Name}
	}
	return key.NamespacedName
}

// listenerSetStatus is gatewayStatus for a ListenerSet: the same hold and bind-failure marks, by
// way of the Gateway status shape they are written for.
func listenerSetStatus(live gwapiv1.ListenerSetStatus, desired *gwapiv1.ListenerSetStatus, g gate) gwapiv1.ListenerSetStatus {
	asGW := func(s *gwapiv1.ListenerSetStatus) *gwapiv1.GatewayStatus {
		out := &gwapiv1.GatewayStatus{Conditions: s.Conditions}
		for _, l := range s.Listeners {
			out.Listeners = append(out.Listeners, gwapiv1.ListenerStatus(l))
		}
		return out
	}
	d, l := asGW(desired), asGW(&live)
	out := gwapiv1.GatewayStatus{Conditions: mergeConditions(l.Conditions, d.Conditions)}
	hold := g.Applied < g.Generation
	if hold {
		holdProgrammed(out.Conditions, l.Conditions, string(gwapiv1.ListenerSetReasonPending), g)
	}
	for _, dl := range d.Listeners {
		dl.Conditions = mergeConditions(liveListener(*l, dl.Name), dl.Conditions)
		if hold {
			holdProgrammed(dl.Conditions, liveListener(*l, dl.Name), string(gwapiv1.ListenerReasonPending), g)
		}
		out.Listeners = append(out.Listeners, dl)
	}
	applyUnbound(&out, *l, d, g, true)
	st := gwapiv1.ListenerSetStatus{Conditions: out.Conditions}
	for _, ol := range out.Listeners {
		st.Listeners = append(st.Listeners, gwapiv1.ListenerEntryStatus(ol))
	}
	return st
}

// gated reports whether nn, a name the gate state is recorded under, is still desired: a Gateway,
// or a ListenerSet by its snapshot name (w.mu held).
func (w *Writer) gated(nn types.NamespacedName) bool {
	if ls, ok := strings.CutPrefix(nn.Name, listenerSetPrefix); ok {
		_, desired := w.listenerSets[types.NamespacedName{Namespace: nn.Namespace, Name: ls}]
		return desired
	}
	_, desired := w.gateways[nn]
	return desired
}

// ListenerSetWithUnbound returns a copy of a translated ListenerSet status with what proxies
// cannot bind marked as the writer marks it (standalone `serve` uses it for its report).
func ListenerSetWithUnbound(desired *gwapiv1.ListenerSetStatus, failures []ListenerFailure, now metav1.Time) *gwapiv1.ListenerSetStatus {
	if desired == nil || len(failures) == 0 {
		return desired
	}
	gen := generationOf(desired.Conditions)
	st := listenerSetStatus(*desired, desired, gate{Generation: gen, Applied: gen, Unbound: failures, Now: now})
	return &st
}
