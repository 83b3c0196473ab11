package translator

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	policyv1a1 "github.com/coxswain-labs/coxswain/modules/api/policy/v1alpha1"
	"github.com/coxswain-labs/coxswain/modules/lb/ewma"
	"github.com/coxswain-labs/coxswain/modules/lb/hash"
	"github.com/coxswain-labs/coxswain/modules/lb/leastconn"
)

// balancers is a registry of every stock balancer but round robin, the proxy's default.
var balancers = []core.Module{&hash.Hash{}, &leastconn.LeastConn{}, &ewma.EWMA{}}

func policyObject(name string, age int, spec policyv1a1.CoxswainBackendPolicySpec, targets ...string) *policyv1a1.CoxswainBackendPolicy {
	for _, s := range targets {
		spec.TargetRefs = append(spec.TargetRefs, gwapiv1.LocalPolicyTargetReference{Kind: "Service", Name: gwapiv1.ObjectName(s)})
	}
	return &policyv1a1.CoxswainBackendPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: name, Generation: 3, CreationTimestamp: metav1.NewTime(time.Unix(int64(1000+age), 0))},
		Spec:       spec,
	}
}

func TestBackendPolicySettings(t *testing.T) {
	i32 := func(v int32) *int32 { return &v }
	hashMC := func(json string) *irv1.ModuleConfig { return &irv1.ModuleConfig{Id: "lb.hash", Json: []byte(json)} }
	cookie := func(name string) *irv1.SessionPersistence {
		return &irv1.SessionPersistence{Type: irv1.SessionPersistence_COOKIE, Name: name}
	}
	breaker := func(th, win, open, minReq, maxOpen uint32) *irv1.CircuitBreaker {
		return &irv1.CircuitBreaker{ThresholdPercent: th, WindowMs: win, OpenMs: open, MinRequests: minReq, MaxOpenMs: maxOpen}
	}
	tests := []struct {
		name string
		spec policyv1a1.CoxswainBackendPolicySpec
		want clusterSettings
		// ignored are the fields ignored, each with a piece of its reason.
		ignored map[string]string
	}{
		{name: "empty"},
		{name: "timeouts",
			spec: policyv1a1.CoxswainBackendPolicySpec{Timeouts: &policyv1a1.BackendTimeouts{Connect: "500ms", Idle: "1m30s"}},
			want: clusterSettings{connectMS: 500, idleMS: 90000}},
		{name: "bad timeouts",
			spec:    policyv1a1.CoxswainBackendPolicySpec{Timeouts: &policyv1a1.BackendTimeouts{Connect: "fast", Idle: "10us"}},
			ignored: map[string]string{"spec.timeouts.connect": `"fast" is not a duration`, "spec.timeouts.idle": "less than 1ms"}},
		{name: "negative and huge timeouts",
			spec:    policyv1a1.CoxswainBackendPolicySpec{Timeouts: &policyv1a1.BackendTimeouts{Connect: "-1s", Idle: "10000h"}},
			ignored: map[string]string{"spec.timeouts.connect": "less than 1ms", "spec.timeouts.idle": "longer than"}},
		{name: "round_robin is the default", spec: algorithm("round_robin")},
		{name: "least_conn", spec: algorithm("least_conn"), want: clusterSettings{balancer: &irv1.ModuleConfig{Id: "lb.least_conn"}}},
		{name: "ewma", spec: algorithm("ewma"), want: clusterSettings{balancer: &irv1.ModuleConfig{Id: "lb.ewma"}}},
		{name: "ip_hash", spec: algorithm("ip_hash"), want: clusterSettings{balancer: hashMC(`{"key":"source-ip"}`)}},
		{name: "hash:source-ip", spec: algorithm("hash:source-ip"), want: clusterSettings{balancer: hashMC(`{"key":"source-ip"}`)}},
		{name: "hash:uri", spec: algorithm("hash:uri"), want: clusterSettings{balancer: hashMC(`{"key":"uri"}`)}},
		{name: "hash:header", spec: algorithm("hash:header=X-User"), want: clusterSettings{balancer: hashMC(`{"key":"header","name":"X-User"}`)}},
		{name: "hash:cookie", spec: algorithm("hash:cookie=sid"), want: clusterSettings{balancer: hashMC(`{"key":"cookie","name":"sid"}`)}},
		{name: "unknown algorithm", spec: algorithm("fastest"),
			ignored: map[string]string{"spec.loadBalancer.algorithm": `unknown algorithm "fastest"`}},
		{name: "hash:header without a name", spec: algorithm("hash:header="),
			ignored: map[string]string{"spec.loadBalancer.algorithm": "needs a name; round_robin is used"}},
		{name: "hash:header with a bad name", spec: algorithm("hash:header=X User"),
			ignored: map[string]string{"spec.loadBalancer.algorithm": `"X User" is not a valid header name`}},
		{name: "breaker with defaults",
			spec: policyv1a1.CoxswainBackendPolicySpec{CircuitBreaker: &policyv1a1.BackendCircuitBreaker{Threshold: i32(50)}},
			want: clusterSettings{breaker: breaker(50, 10000, 5000, 10, 0)}},
		{name: "breaker in full",
			spec: policyv1a1.CoxswainBackendPolicySpec{CircuitBreaker: &policyv1a1.BackendCircuitBreaker{Threshold: i32(100),
				Window: "30s", OpenDuration: "2s", MinRequests: i32(1), MaxOpenDuration: "1m"}},
			want: clusterSettings{breaker: breaker(100, 30000, 2000, 1, 60000)}},
		{name: "breaker threshold out of range",
			spec:    policyv1a1.CoxswainBackendPolicySpec{CircuitBreaker: &policyv1a1.BackendCircuitBreaker{Threshold: i32(150)}},
			ignored: map[string]string{"spec.circuitBreaker.threshold": "150 is not a percentage from 1 to 100; there is no circuit breaker"}},
		{name: "breaker without a threshold",
			spec:    policyv1a1.CoxswainBackendPolicySpec{CircuitBreaker: &policyv1a1.BackendCircuitBreaker{Window: "1s"}},
			ignored: map[string]string{"spec.circuitBreaker.threshold": "is not set"}},
		{name: "breaker with bad fields",
			spec: policyv1a1.CoxswainBackendPolicySpec{CircuitBreaker: &policyv1a1.BackendCircuitBreaker{Threshold: i32(20),
				Window: "ten seconds", OpenDuration: "0s", MinRequests: i32(0), MaxOpenDuration: "1s"}},
			want: clusterSettings{breaker: breaker(20, 10000, 5000, 10, 0)},
			ignored: map[string]string{"spec.circuitBreaker.window": "10s is used", "spec.circuitBreaker.openDuration": "5s is used",
				"spec.circuitBreaker.minRequests": "0 is less than 1; 10 is used", "spec.circuitBreaker.maxOpenDuration": "shorter than the open duration (5s)"}},
		{name: "cookie persistence with the default name",
			spec: policyv1a1.CoxswainBackendPolicySpec{SessionPersistence: &policyv1a1.BackendSessionPersistence{Type: "Cookie"}},
			want: clusterSettings{persistence: cookie(DefaultSessionCookie)}},
		{name: "type defaults to Cookie",
			spec: policyv1a1.CoxswainBackendPolicySpec{SessionPersistence: &policyv1a1.BackendSessionPersistence{SessionName: "sid"}},
			want: clusterSettings{persistence: cookie("sid")}},
		{name: "bad cookie name",
			spec:    policyv1a1.CoxswainBackendPolicySpec{SessionPersistence: &policyv1a1.BackendSessionPersistence{Type: "Cookie", SessionName: "my session"}},
			want:    clusterSettings{persistence: cookie(DefaultSessionCookie)},
			ignored: map[string]string{"spec.sessionPersistence.sessionName": "not a valid cookie name; __coxswain_session is used"}},
		{name: "header persistence",
			spec: policyv1a1.CoxswainBackendPolicySpec{SessionPersistence: &policyv1a1.BackendSessionPersistence{Type: "Header", SessionName: "X-Session"}},
			want: clusterSettings{persistence: &irv1.SessionPersistence{Type: irv1.SessionPersistence_HEADER, Name: "X-Session"}}},
		{name: "header persistence without a name",
			spec:    policyv1a1.CoxswainBackendPolicySpec{SessionPersistence: &policyv1a1.BackendSessionPersistence{Type: "Header"}},
			ignored: map[string]string{"spec.sessionPersistence.sessionName": "is required with type Header (the header to hash); there is no session persistence"}},
		{name: "unknown persistence type",
			spec:    policyv1a1.CoxswainBackendPolicySpec{SessionPersistence: &policyv1a1.BackendSessionPersistence{Type: "IP"}},
			ignored: map[string]string{"spec.sessionPersistence.type": `unknown type "IP" (want Cookie or Header)`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newSession(context.Background(), nil, Options{Registry: core.NewRegistry(balancers...)})
			got, ign := s.settingsOf(&tc.spec)
			if got.connectMS != tc.want.connectMS || got.idleMS != tc.want.idleMS || !proto.Equal(got.balancer, tc.want.balancer) ||
				!proto.Equal(got.breaker, tc.want.breaker) || !proto.Equal(got.persistence, tc.want.persistence) {
				t.Errorf("settings %+v, want %+v", got, tc.want)
			}
			if len(ign) != len(tc.ignored) {
				t.Errorf("ignored %+v, want %v", ign, tc.ignored)
			}
			for _, ig := range ign {
				if want, ok := tc.ignored[ig.field]; !ok || !strings.Contains(ig.why, want) {
					t.Errorf("ignored %s: %q, want it to contain %q", ig.field, ig.why, want)
				}
			}
		})
	}
}

func algorithm(a string) policyv1a1.CoxswainBackendPolicySpec {
	return policyv1a1.CoxswainBackendPolicySpec{LoadBalancer: &policyv1a1.BackendLoadBalancer{Algorithm: a}}
}

func TestBackendPolicyBalancerNotCompiledIn(t *testing.T) {
	s := newSession(context.Background(), nil, Options{Registry: core.NewRegistry(&hash.Hash{})})
	got, ign := s.settingsOf(&policyv1a1.CoxswainBackendPolicySpec{LoadBalancer: &policyv1a1.BackendLoadBalancer{Algorithm: "ewma"}})
	if got.balancer != nil || len(ign) != 1 || !strings.Contains(ign[0].why, "needs module lb.ewma, which is not compiled into this build; round_robin is used") {
		t.Errorf("balancer %v, ignored %+v", got.balancer, ign)
	}
}

// l4Kind is extKind with TCP clusters, as TCPRoute's.
type l4Kind struct{ extKind }

func (l4Kind) ClusterProtocol() irv1.Cluster_Protocol { return irv1.Cluster_TCP }

func (k l4Kind) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: "translate.route.stream", New: func() core.Module { return k }}
}

// fullSpec sets every field.
func fullSpec() policyv1a1.CoxswainBackendPolicySpec {
	th := int32(50)
	return policyv1a1.CoxswainBackendPolicySpec{
		Timeouts:           &policyv1a1.BackendTimeouts{Connect: "250ms", Idle: "30s"},
		LoadBalancer:       &policyv1a1.BackendLoadBalancer{Algorithm: "least_conn"},
		CircuitBreaker:     &policyv1a1.BackendCircuitBreaker{Threshold: &th},
		SessionPersistence: &policyv1a1.BackendSessionPersistence{Type: "Cookie"},
	}
}

func TestBackendPolicyClusters(t *testing.T) {
	key := []byte("master key")
	translate := func(t *testing.T, kind core.Module, opts Options) *irv1.Cluster {
		t.Helper()
		store := tcpStore()
		store.Add(streamGVK.GroupKind(), pgRoute())
		store.BackendPolicies = []*policyv1a1.CoxswainBackendPolicy{policyObject("pg", 0, fullSpec(), "pg")}
		opts.Registry = core.NewRegistry(append([]core.Module{kind}, balancers...)...)
		res := Translate(context.Background(), store, opts)
		if len(res.Snapshot.Clusters) != 1 {
			t.Fatalf("clusters %v, problems %v", res.Snapshot.Clusters, res.Problems)
		}
		return res.Snapshot.Clusters[0]
	}
	t.Run("HTTP cluster gets every setting", func(t *testing.T) {
		c := translate(t, extKind{}, Options{SessionKey: key})
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(c.Name))
		want := &irv1.Cluster{Name: "db/pg:5432", Endpoints: c.Endpoints, ConnectTimeoutMs: 250, IdleTimeoutMs: 30000,
			Balancer:       &irv1.ModuleConfig{Id: "lb.least_conn"},
			CircuitBreaker: &irv1.CircuitBreaker{ThresholdPercent: 50, WindowMs: 10000, OpenMs: 5000, MinRequests: 10},
			SessionPersistence: &irv1.SessionPersistence{Type: irv1.SessionPersistence_COOKIE, Name: DefaultSessionCookie,
				Key: mac.Sum(nil)}}
		if !proto.Equal(c, want) {
			t.Errorf("cluster\n%v\nwant\n%v", c, want)
		}
		if again := translate(t, extKind{}, Options{SessionKey: key}); !proto.Equal(again, c) {
			t.Error("the session key differs between two translations of the same store")
		}
		if other := translate(t, extKind{}, Options{SessionKey: []byte("another")}); string(other.SessionPersistence.Key) == string(c.SessionPersistence.Key) {
			t.Error("the session key does not depend on the master key")
		}
	})
	t.Run("layer-4 cluster gets the connect timeout and the balancer only", func(t *testing.T) {
		c := translate(t, l4Kind{}, Options{SessionKey: key})
		want := &irv1.Cluster{Name: "db/pg:5432/tcp", Protocol: irv1.Cluster_TCP, Endpoints: c.Endpoints, ConnectTimeoutMs: 250,
			Balancer: &irv1.ModuleConfig{Id: "lb.least_conn"}}
		if !proto.Equal(c, want) {
			t.Errorf("cluster\n%v\nwant\n%v", c, want)
		}
	})
}

func TestBackendPolicyStatus(t *testing.T) {
	store := tcpStore()
	store.Services = append(store.Services, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "db", Name: "cache"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 6379}}}})
	store.Add(streamGVK.GroupKind(), pgRoute())
	newer := policyObject("a-newer", 10, algorithm("ewma"), "pg", "cache")
	older := policyObject("z-older", 0, policyv1a1.CoxswainBackendPolicySpec{Timeouts: &policyv1a1.BackendTimeouts{Connect: "soon"}}, "pg", "pg", "gone")
	older.Spec.TargetRefs = append(older.Spec.TargetRefs, gwapiv1.LocalPolicyTargetReference{Group: "apps", Kind: "Deployment", Name: "pg"})
	tie := policyObject("b-tie", 10, algorithm("ewma"), "cache") // as old as a-newer: the name decides
	store.BackendPolicies = []*policyv1a1.CoxswainBackendPolicy{newer, older, tie}
	res := Translate(context.Background(), store, Options{Registry: core.NewRegistry(extKind{}, &ewma.EWMA{})})

	type anc struct{ kind, name, status, reason, msg string }
	check := func(pol string, want ...anc) {
		t.Helper()
		st := res.Policies[PolicyKey{Group: policyv1a1.GroupName, Kind: "CoxswainBackendPolicy", Namespace: "db", Name: pol}]
		if st == nil || len(st.Ancestors) != len(want) {
			t.Fatalf("%s: status %+v, want %d ancestors", pol, st, len(want))
		}
		for i, w := range want {
			a := st.Ancestors[i]
			if string(*a.AncestorRef.Kind) != w.kind || string(a.AncestorRef.Name) != w.name || string(*a.AncestorRef.Namespace) != "db" ||
				a.ControllerName != DefaultControllerName || len(a.Conditions) != 1 {
				t.Errorf("%s ancestor %d: %+v, want %s %s", pol, i, a, w.kind, w.name)
				continue
			}
			c := a.Conditions[0]
			if c.Type != "Accepted" || string(c.Status) != w.status || c.Reason != w.reason || !strings.Contains(c.Message, w.msg) || c.ObservedGeneration != 3 {
				t.Errorf("%s ancestor %s: %s=%s %s (gen %d) %q, want %s %s containing %q", pol, w.name, c.Type, c.Status, c.Reason, c.ObservedGeneration, c.Message, w.status, w.reason, w.msg)
			}
		}
	}
	check("z-older",
		anc{"Service", "gone", "False", "TargetNotFound", "Service db/gone does not exist"},
		anc{"Service", "pg", "True", "Accepted", `Applied to Service db/pg; ignored (the defaults apply): spec.timeouts.connect: "soon" is not a duration`},
		anc{"Deployment", "pg", "False", "Invalid", `spec.targetRefs[3] is a Deployment.apps; only Services`})
	check("a-newer",
		anc{"Service", "cache", "True", "Accepted", "Applied to Service db/cache"},
		anc{"Service", "pg", "False", "Conflicted", "CoxswainBackendPolicy db/z-older is older and targets Service db/pg too"})
	check("b-tie", anc{"Service", "cache", "False", "Conflicted", "CoxswainBackendPolicy db/a-newer is older"})

	if c := res.Snapshot.Clusters[0]; c.ConnectTimeoutMs != 0 || c.Balancer != nil {
		t.Errorf("pg's cluster takes the older policy (with its bad connect timeout ignored): %v", c)
	}
	var problems []string
	for _, p := range res.Problems {
		problems = append(problems, p.Error())
	}
	wantProblems := []string{
		"CoxswainBackendPolicy db/a-newer: spec.targetRefs[0]: CoxswainBackendPolicy db/z-older is older and targets Service db/pg too: it applies there, this policy does not (Conflicted)",
		"CoxswainBackendPolicy db/b-tie: spec.targetRefs[0]: CoxswainBackendPolicy db/a-newer is older and targets Service db/cache too: it applies there, this policy does not (Conflicted)",
		"CoxswainBackendPolicy db/z-older: spec.targetRefs[2]: Service db/gone does not exist (TargetNotFound)",
		`CoxswainBackendPolicy db/z-older: spec.targetRefs[3]: spec.targetRefs[3] is a Deployment.apps; only Services (group "", kind Service) can be targeted (Invalid)`,
	}
	if strings.Join(problems, "\n") != strings.Join(wantProblems, "\n") {
		t.Errorf("problems\n%s\nwant\n%s", strings.Join(problems, "\n"), strings.Join(wantProblems, "\n"))
	}
	if len(res.Warnings) != 1 || res.Warnings[0].Field != "spec.timeouts.connect" || res.Warnings[0].Name != "z-older" || res.Warnings[0].Reason != ReasonWarning {
		t.Errorf("warnings %v", res.Warnings)
	}
}

// TestBackendPolicyEndpointsFastPath: the endpoints fast path keeps what a policy set on a
// cluster, so it still gives the version a full translation does.
func TestBackendPolicyEndpointsFastPath(t *testing.T) {
	store := tcpStore()
	store.Add(streamGVK.GroupKind(), pgRoute())
	store.BackendPolicies = []*policyv1a1.CoxswainBackendPolicy{policyObject("pg", 0, fullSpec(), "pg")}
	opts := Options{Registry: core.NewRegistry(append([]core.Module{extKind{}}, balancers...)...), SessionKey: []byte("k")}
	prev := Translate(context.Background(), store, opts).Snapshot
	es := store.EndpointSlices[0].DeepCopy()
	es.Endpoints[0].Addresses = []string{"10.0.0.6"}
	store.EndpointSlices[0] = es
	want := Translate(context.Background(), store, opts).Snapshot
	got := RefreshEndpoints(context.Background(), prev, store, opts)
	if got.GetVersion() != want.GetVersion() || got.GetVersion() == prev.GetVersion() {
		t.Fatalf("fast path %s, full translation %s, before %s\nfast: %v\nfull: %v", got.GetVersion(), want.GetVersion(), prev.GetVersion(),
			got.GetClusters(), want.GetClusters())
	}
	if got.Clusters[0].GetSessionPersistence().GetKey() == nil || got.Clusters[0].GetConnectTimeoutMs() != 250 {
		t.Errorf("cluster lost its policy: %v", got.Clusters[0])
	}
}
