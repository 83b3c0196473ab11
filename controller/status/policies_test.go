package status

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"
)

const ours gwapiv1.GatewayController = "coxswain-labs.dev/gateway-controller"

func serviceRef(name string) gwapiv1.ParentReference {
	return gwapiv1.ParentReference{Group: ptr(gwapiv1.Group("")), Kind: ptr(gwapiv1.Kind("Service")),
		Namespace: ptr(gwapiv1.Namespace("ns")), Name: gwapiv1.ObjectName(name)}
}

func ancestor(ctrl gwapiv1.GatewayController, svc string, c metav1.Condition) gwapiv1.PolicyAncestorStatus {
	return gwapiv1.PolicyAncestorStatus{AncestorRef: serviceRef(svc), ControllerName: ctrl, Conditions: []metav1.Condition{c}}
}

func TestPolicyAncestors(t *testing.T) {
	theirs := ancestor("example.com/other", "api", cond("Accepted", "False", "Theirs", 1, t0))
	live := []gwapiv1.PolicyAncestorStatus{
		ancestor(ours, "gone", cond("Accepted", "True", "Accepted", 1, t0)),
		theirs,
		ancestor(ours, "api", cond("Accepted", "True", "Accepted", 1, t0)),
	}
	desired := []gwapiv1.PolicyAncestorStatus{
		ancestor("", "api", cond("Accepted", "True", "Accepted", 2, t1)),
		ancestor("", "web", cond("Accepted", "False", "Conflicted", 2, t1)),
	}
	got := policyAncestors(live, desired, ours)
	if len(got) != 3 {
		t.Fatalf("ancestors %+v, want theirs and our two", got)
	}
	if !Equal(got[0], theirs) {
		t.Errorf("their entry changed or moved: %+v", got[0])
	}
	if a := got[1]; a.AncestorRef.Name != "api" || a.ControllerName != ours || a.Conditions[0].ObservedGeneration != 2 || !a.Conditions[0].LastTransitionTime.Equal(&t0) {
		t.Errorf("api: %+v, want generation 2 with the live lastTransitionTime", a)
	}
	if a := got[2]; a.AncestorRef.Name != "web" || a.ControllerName != ours || !a.Conditions[0].LastTransitionTime.Equal(&t1) {
		t.Errorf("web: %+v", a)
	}
	if got := policyAncestors(nil, nil, ours); got == nil {
		t.Error("ancestors is required: want an empty list, not nil")
	}
}

// policy stands for a policy object in a fake API server.
type policy struct {
	nn     types.NamespacedName
	rv     int
	status gwapiv1.PolicyStatus
}

// policyServer is an in-memory API server and informer cache of policies.
type policyServer struct {
	mu     sync.Mutex
	objs   map[types.NamespacedName]*policy
	writes []types.NamespacedName
}

func (s *policyServer) client() PolicyClient[*policy] {
	get := func(_ context.Context, ns, name string) (*policy, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		p, ok := s.objs[types.NamespacedName{Namespace: ns, Name: name}]
		if !ok {
			return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "policies"}, name)
		}
		c := *p
		return &c, nil
	}
	return PolicyClient[*policy]{
		KindName: "TestPolicy",
		Cached:   func(ns, name string) (*policy, error) { return get(context.Background(), ns, name) },
		Get:      get,
		List: func() ([]*policy, error) {
			s.mu.Lock()
			defer s.mu.Unlock()
			var out []*policy
			for _, p := range s.objs {
				c := *p
				out = append(out, &c)
			}
			return out, nil
		},
		UpdateStatus: func(_ context.Context, p *policy) error {
			s.mu.Lock()
			defer s.mu.Unlock()
			cur := s.objs[p.nn]
			if cur.rv != p.rv {
				return apierrors.NewConflict(schema.GroupResource{Resource: "policies"}, p.nn.Name, nil)
			}
			s.objs[p.nn] = &policy{nn: p.nn, rv: p.rv + 1, status: p.status}
			s.writes = append(s.writes, p.nn)
			return nil
		},
		Status:     func(p *policy) (types.NamespacedName, gwapiv1.PolicyStatus) { return p.nn, p.status },
		WithStatus: func(p *policy, st gwapiv1.PolicyStatus) *policy { c := *p; c.status = st; return &c },
	}
}

func (s *policyServer) status(name string) gwapiv1.PolicyStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.objs[types.NamespacedName{Namespace: "ns", Name: name}].status
}

func (s *policyServer) writeCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.writes)
}

// TestWriterPolicies runs the writer against a fake policy kind: desired ancestors are written
// next to another controller's, an unchanged translation writes nothing, and the entries of a
// policy that left the result, or that an earlier leader left behind, are removed.
func TestWriterPolicies(t *testing.T) {
	nn := func(name string) types.NamespacedName { return types.NamespacedName{Namespace: "ns", Name: name} }
	theirs := ancestor("example.com/other", "api", cond("Accepted", "True", "Accepted", 1, t0))
	srv := &policyServer{objs: map[types.NamespacedName]*policy{
		nn("p"):     {nn: nn("p"), rv: 1, status: gwapiv1.PolicyStatus{Ancestors: []gwapiv1.PolicyAncestorStatus{theirs}}},
		nn("stale"): {nn: nn("stale"), rv: 1, status: gwapiv1.PolicyStatus{Ancestors: []gwapiv1.PolicyAncestorStatus{ancestor(ours, "old", cond("Accepted", "True", "Accepted", 1, t0))}}},
		nn("other"): {nn: nn("other"), rv: 1, status: gwapiv1.PolicyStatus{Ancestors: []gwapiv1.PolicyAncestorStatus{theirs}}},
	}}
	w := NewWriter(Options{Log: zap.NewNop(), ControllerName: ours, Policies: []Policies{srv.client()}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	key := Key{Kind: "TestPolicy", NamespacedName: nn("p")}
	desired := func(c metav1.Condition) Desired {
		return Desired{Policies: map[Key]*gwapiv1.PolicyStatus{key: {Ancestors: []gwapiv1.PolicyAncestorStatus{ancestor(ours, "api", c)}}}}
	}
	waitUntil := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !ok(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; writes %v", what, srv.writes)
			}
		}
	}
	w.Desire(desired(cond("Accepted", "True", "Accepted", 1, t0)))
	waitUntil("our entry next to theirs", func() bool {
		st := srv.status("p")
		return len(st.Ancestors) == 2 && Equal(st.Ancestors[0], theirs) && st.Ancestors[1].ControllerName == ours
	})
	waitUntil("the stale entry removed", func() bool { return len(srv.status("stale").Ancestors) == 0 })
	if st := srv.status("stale"); st.Ancestors == nil {
		t.Error("ancestors written as null")
	}
	writes := srv.writeCount()

	w.Desire(desired(cond("Accepted", "True", "Accepted", 1, t1))) // only lastTransitionTime differs
	w.Touch(key)
	w.Touch(Key{Kind: "TestPolicy", NamespacedName: nn("other")}) // theirs only: never written
	time.Sleep(100 * time.Millisecond)
	if n := srv.writeCount(); n != writes {
		t.Errorf("%d writes for nothing new", n-writes)
	}

	w.Desire(desired(cond("Accepted", "False", "Conflicted", 2, t1)))
	waitUntil("the new condition", func() bool {
		st := srv.status("p")
		return len(st.Ancestors) == 2 && st.Ancestors[1].Conditions[0].Reason == "Conflicted"
	})

	w.Desire(Desired{}) // the policy left the result: our entry goes, theirs stays
	waitUntil("our entry removed", func() bool {
		st := srv.status("p")
		return len(st.Ancestors) == 1 && Equal(st.Ancestors[0], theirs)
	})
}
