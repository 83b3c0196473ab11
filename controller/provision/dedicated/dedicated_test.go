package dedicated

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	infrav1a1 "github.com/coxswain-labs/coxswain/modules/api/infrastructure/v1alpha1"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec infrav1a1.CoxswainGatewayParametersSpec
		want []string // substrings of the error; none: valid
	}{
		{name: "empty"},
		{name: "replicas and autoscaling", spec: infrav1a1.CoxswainGatewayParametersSpec{Replicas: ptr.To(int32(2)), Autoscaling: &infrav1a1.Autoscaling{MaxReplicas: 3}},
			want: []string{"spec.replicas: replicas and autoscaling are mutually exclusive"}},
		{name: "min above max", spec: infrav1a1.CoxswainGatewayParametersSpec{Autoscaling: &infrav1a1.Autoscaling{MinReplicas: ptr.To(int32(4)), MaxReplicas: 3}},
			want: []string{"spec.autoscaling.minReplicas"}},
		{name: "pdb both", spec: infrav1a1.CoxswainGatewayParametersSpec{PodDisruptionBudget: &infrav1a1.PodDisruptionBudget{
			MinAvailable: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(1))}},
			want: []string{"spec.podDisruptionBudget: exactly one"}},
		{name: "extra arg names the gateway", spec: infrav1a1.CoxswainGatewayParametersSpec{ExtraArgs: []string{"--log-level=debug", "--gateway=other/gw"}},
			want: []string{"spec.extraArgs[1]: --gateway is set by the controller"}},
		{name: "hostPath", spec: infrav1a1.CoxswainGatewayParametersSpec{Pod: &infrav1a1.PodSettings{Volumes: []corev1.Volume{
			{Name: "ok", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}}},
			want: []string{"spec.pod.volumes[1].hostPath: hostPath volumes are not allowed"}},
		{name: "privileged and capabilities", spec: infrav1a1.CoxswainGatewayParametersSpec{Pod: &infrav1a1.PodSettings{ContainerSecurityContext: &corev1.SecurityContext{
			Privileged: ptr.To(true), Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_ADMIN"}}}}},
			want: []string{"spec.pod.containerSecurityContext.privileged", "spec.pod.containerSecurityContext.capabilities.add"}},
		{name: "root", spec: infrav1a1.CoxswainGatewayParametersSpec{Pod: &infrav1a1.PodSettings{SecurityContext: &corev1.PodSecurityContext{RunAsUser: ptr.To(int64(0))}}},
			want: []string{"spec.pod.securityContext.runAsUser"}},
		{name: "writable root and escalation", spec: infrav1a1.CoxswainGatewayParametersSpec{Pod: &infrav1a1.PodSettings{ContainerSecurityContext: &corev1.SecurityContext{
			ReadOnlyRootFilesystem: ptr.To(false), AllowPrivilegeEscalation: ptr.To(true)}}},
			want: []string{"readOnlyRootFilesystem", "allowPrivilegeEscalation"}},
		{name: "mount over the credentials", spec: infrav1a1.CoxswainGatewayParametersSpec{Pod: &infrav1a1.PodSettings{VolumeMounts: []corev1.VolumeMount{
			{Name: "x", MountPath: "/var/run/secrets/coxswain/discovery-token"}}}},
			want: []string{"spec.pod.volumeMounts[0].mountPath"}},
		{name: "harmless overrides", spec: infrav1a1.CoxswainGatewayParametersSpec{Replicas: ptr.To(int32(3)), Pod: &infrav1a1.PodSettings{
			ContainerSecurityContext: &corev1.SecurityContext{Privileged: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"NET_RAW"}}},
			SecurityContext:          &corev1.PodSecurityContext{RunAsUser: ptr.To(int64(1000))}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Validate(&tc.spec)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate: nil, want %q", tc.want)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("message spans lines: %q", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Validate: %q, want it to contain %q", err, w)
				}
			}
		})
	}
}

func params(ns, name string, spec infrav1a1.CoxswainGatewayParametersSpec) *infrav1a1.CoxswainGatewayParameters {
	return &infrav1a1.CoxswainGatewayParameters{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
}

func TestResolve(t *testing.T) {
	store := map[string]*infrav1a1.CoxswainGatewayParameters{
		"apps/small": params("apps", "small", infrav1a1.CoxswainGatewayParametersSpec{Replicas: ptr.To(int32(1))}),
		"infra/big":  params("infra", "big", infrav1a1.CoxswainGatewayParametersSpec{Replicas: ptr.To(int32(5))}),
		"apps/bad":   params("apps", "bad", infrav1a1.CoxswainGatewayParametersSpec{Pod: &infrav1a1.PodSettings{ContainerSecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}}}),
	}
	get := func(ns, name string) (*infrav1a1.CoxswainGatewayParameters, bool) {
		p, ok := store[ns+"/"+name]
		return p, ok
	}
	gwRef := func(group, kind, name string) *gwapiv1.Gateway {
		return &gwapiv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "gw"}, Spec: gwapiv1.GatewaySpec{Infrastructure: &gwapiv1.GatewayInfrastructure{
			ParametersRef: &gwapiv1.LocalParametersReference{Group: gwapiv1.Group(group), Kind: gwapiv1.Kind(kind), Name: name}}}}
	}
	plain := &gwapiv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "gw"}}
	class := func(ns *string, name string) *gwapiv1.GatewayClass {
		return &gwapiv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: "coxswain"}, Spec: gwapiv1.GatewayClassSpec{ParametersRef: &gwapiv1.ParametersReference{
			Group: infrav1a1.GroupName, Kind: infrav1a1.GatewayParametersKind, Name: name, Namespace: (*gwapiv1.Namespace)(ns)}}}
	}
	for _, tc := range []struct {
		name    string
		gw      *gwapiv1.Gateway
		class   *gwapiv1.GatewayClass
		want    string // namespace/name of the parameters; "" none
		wantErr string
	}{
		{name: "shared", gw: plain, class: &gwapiv1.GatewayClass{}},
		{name: "own", gw: gwRef(infrav1a1.GroupName, infrav1a1.GatewayParametersKind, "small"), want: "apps/small"},
		{name: "own wins over class", gw: gwRef(infrav1a1.GroupName, infrav1a1.GatewayParametersKind, "small"), class: class(ptr.To("infra"), "big"), want: "apps/small"},
		{name: "class default", gw: plain, class: class(ptr.To("infra"), "big"), want: "infra/big"},
		{name: "other kind", gw: gwRef("", "ConfigMap", "small"), wantErr: "spec.infrastructure.parametersRef: ConfigMap small: only CoxswainGatewayParameters.gateway.coxswain-labs.dev is supported"},
		{name: "missing", gw: gwRef(infrav1a1.GroupName, infrav1a1.GatewayParametersKind, "nope"), wantErr: "CoxswainGatewayParameters apps/nope not found"},
		{name: "invalid", gw: gwRef(infrav1a1.GroupName, infrav1a1.GatewayParametersKind, "bad"), wantErr: "spec.pod.containerSecurityContext.privileged"},
		{name: "class without namespace", gw: plain, class: class(nil, "big"), wantErr: "spec.parametersRef.namespace"},
		{name: "other namespace is not the gateway's", gw: gwRef(infrav1a1.GroupName, infrav1a1.GatewayParametersKind, "big"), wantErr: "apps/big not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ResolveGateway(tc.gw, tc.class, get)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if p != nil {
				got = p.Namespace + "/" + p.Name
			}
			if got != tc.want {
				t.Fatalf("params %q, want %q", got, tc.want)
			}
		})
	}
}

func gateway() *gwapiv1.Gateway {
	return &gwapiv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "edge"}, Spec: gwapiv1.GatewaySpec{Listeners: []gwapiv1.Listener{
		{Name: "http", Port: 80, Protocol: gwapiv1.HTTPProtocolType},
		{Name: "https", Port: 443, Protocol: gwapiv1.HTTPSProtocolType},
		{Name: "https-b", Port: 443, Protocol: gwapiv1.HTTPSProtocolType, Hostname: ptr.To(gwapiv1.Hostname("b.example"))},
		{Name: "dns", Port: 53, Protocol: gwapiv1.UDPProtocolType},
	}}}
}

func render(spec infrav1a1.CoxswainGatewayParametersSpec) map[string]client.Object {
	objs := Render(Input{Gateway: gateway(), Params: params("apps", "p", spec), Image: "ghcr.io/coxswain-labs/coxswain:v1",
		DiscoveryAddress: "coxswain-discovery.coxswain-system.svc:50051", TrustBundle: "PEM", ServiceAccount: "coxswain-edge",
		Meta:    Meta{Labels: map[string]string{"team": "edge"}, Annotations: map[string]string{"owner": "sre"}},
		Sockets: []Socket{{53, corev1.ProtocolUDP}, {80, corev1.ProtocolTCP}, {443, corev1.ProtocolTCP}, {443, corev1.ProtocolUDP}}})
	out := map[string]client.Object{}
	for _, o := range objs {
		out[o.GetObjectKind().GroupVersionKind().Kind] = o
	}
	return out
}

func TestRenderDefaults(t *testing.T) {
	objs := render(infrav1a1.CoxswainGatewayParametersSpec{})
	if len(objs) != 4 {
		t.Fatalf("kinds %v, want ServiceAccount, ConfigMap, Deployment, Service", objs)
	}
	for kind, o := range objs {
		if o.GetNamespace() != "apps" || o.GetLabels()["team"] != "edge" || o.GetAnnotations()["owner"] != "sre" {
			t.Errorf("%s %s/%s: labels %v annotations %v", kind, o.GetNamespace(), o.GetName(), o.GetLabels(), o.GetAnnotations())
		}
	}
	sa := objs["ServiceAccount"].(*corev1.ServiceAccount)
	if sa.Name != "coxswain-edge" || sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken {
		t.Errorf("ServiceAccount %s automount %v", sa.Name, sa.AutomountServiceAccountToken)
	}
	if cm := objs["ConfigMap"].(*corev1.ConfigMap); cm.Data["ca.crt"] != "PEM" || cm.Name != "coxswain-edge-trust-bundle" {
		t.Errorf("ConfigMap %s %v", cm.Name, cm.Data)
	}
	d := objs["Deployment"].(*appsv1.Deployment)
	ps := d.Spec.Template.Spec
	if *d.Spec.Replicas != 2 || ps.ServiceAccountName != "coxswain-edge" || *ps.AutomountServiceAccountToken || ps.HostNetwork {
		t.Errorf("replicas %d sa %s automount %v hostNetwork %v", *d.Spec.Replicas, ps.ServiceAccountName, *ps.AutomountServiceAccountToken, ps.HostNetwork)
	}
	if !*ps.SecurityContext.RunAsNonRoot {
		t.Error("pod may run as root")
	}
	c := ps.Containers[0]
	wantArgs := []string{"proxy", "--gateway=apps/edge", "--discovery-address=coxswain-discovery.coxswain-system.svc:50051",
		"--token-file=/var/run/secrets/coxswain/discovery-token/token", "--trust-bundle=/var/run/secrets/coxswain/trust-bundle/ca.crt", "--admin-address=:9901"}
	if c.Image != "ghcr.io/coxswain-labs/coxswain:v1" || !slices.Equal(c.Args, wantArgs) {
		t.Errorf("image %s args %q", c.Image, c.Args)
	}
	if sc := c.SecurityContext; *sc.Privileged || *sc.AllowPrivilegeEscalation || !*sc.ReadOnlyRootFilesystem || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0 {
		t.Errorf("container security %+v", sc)
	}
	var token *corev1.ServiceAccountTokenProjection
	for _, v := range ps.Volumes {
		if v.HostPath != nil {
			t.Errorf("hostPath volume %s", v.Name)
		}
		if v.Projected != nil {
			token = v.Projected.Sources[0].ServiceAccountToken
		}
		if v.ConfigMap != nil && v.ConfigMap.Name != "coxswain-edge-trust-bundle" {
			t.Errorf("trust bundle from %s", v.ConfigMap.Name)
		}
	}
	if token == nil || token.Audience != "coxswain-discovery" || token.Path != "token" {
		t.Errorf("token projection %+v", token)
	}
	svc := objs["Service"].(*corev1.Service)
	var ports []string
	for _, p := range svc.Spec.Ports {
		ports = append(ports, p.Name+"="+p.TargetPort.String())
	}
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || !slices.Equal(ports, []string{"udp-53=53", "tcp-80=80", "tcp-443=443", "udp-443=443"}) {
		t.Errorf("Service %s ports %v", svc.Spec.Type, ports)
	}
	for k, v := range svc.Spec.Selector {
		if d.Spec.Template.Labels[k] != v {
			t.Errorf("Service selector %s=%s does not select the pods (%v)", k, v, d.Spec.Template.Labels)
		}
	}
}

func TestRenderOverrides(t *testing.T) {
	objs := render(infrav1a1.CoxswainGatewayParametersSpec{
		Autoscaling:         &infrav1a1.Autoscaling{MinReplicas: ptr.To(int32(3)), MaxReplicas: 9},
		PodDisruptionBudget: &infrav1a1.PodDisruptionBudget{MaxUnavailable: ptr.To(intstr.FromString("25%"))},
		Image:               ptr.To("registry.example/coxswain:custom"),
		ExtraArgs:           []string{"--log-level=debug"},
		Service: &infrav1a1.ServiceSettings{Type: ptr.To(corev1.ServiceTypeNodePort), Annotations: map[string]string{"lb": "internal"},
			ExternalTrafficPolicy: ptr.To(corev1.ServiceExternalTrafficPolicyLocal), LoadBalancerClass: ptr.To("ignored-for-nodeport")},
		TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: corev1.DoNotSchedule}},
		Pod:                       &infrav1a1.PodSettings{Labels: map[string]string{"app.kubernetes.io/component": "evil", "tier": "edge"}},
	})
	d := objs["Deployment"].(*appsv1.Deployment)
	if d.Spec.Replicas != nil {
		t.Errorf("replicas %d with an HPA", *d.Spec.Replicas)
	}
	c := d.Spec.Template.Spec.Containers[0]
	if c.Image != "registry.example/coxswain:custom" || c.Args[len(c.Args)-1] != "--log-level=debug" {
		t.Errorf("image %s args %q", c.Image, c.Args)
	}
	if l := d.Spec.Template.Labels; l["app.kubernetes.io/component"] != "dedicated-proxy" || l["tier"] != "edge" {
		t.Errorf("pod labels %v", l)
	}
	if tsc := d.Spec.Template.Spec.TopologySpreadConstraints; len(tsc) != 1 || tsc[0].LabelSelector.MatchLabels["gateway.networking.k8s.io/gateway-name"] != "edge" {
		t.Errorf("spread %+v", tsc)
	}
	hpa := objs["HorizontalPodAutoscaler"].(*autoscalingv2.HorizontalPodAutoscaler)
	if *hpa.Spec.MinReplicas != 3 || hpa.Spec.MaxReplicas != 9 || *hpa.Spec.Metrics[0].Resource.Target.AverageUtilization != 80 || hpa.Spec.ScaleTargetRef.Name != d.Name {
		t.Errorf("HPA %+v", hpa.Spec)
	}
	if pdb := objs["PodDisruptionBudget"].(*policyv1.PodDisruptionBudget); pdb.Spec.MaxUnavailable.String() != "25%" || pdb.Spec.MinAvailable != nil {
		t.Errorf("PDB %+v", pdb.Spec)
	}
	svc := objs["Service"].(*corev1.Service)
	if svc.Spec.Type != corev1.ServiceTypeNodePort || svc.Annotations["lb"] != "internal" || svc.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal || svc.Spec.LoadBalancerClass != nil {
		t.Errorf("Service %+v %v", svc.Spec, svc.Annotations)
	}
}

func TestLongNames(t *testing.T) {
	gw := gateway()
	gw.Name = strings.Repeat("g", 200)
	for _, n := range []string{ObjectName(gw), TrustBundleName(gw), selector(gw)["gateway.networking.k8s.io/gateway-name"]} {
		if len(n) > 63 {
			t.Errorf("%q is %d characters", n, len(n))
		}
	}
	if ObjectName(gw) == TrustBundleName(gw) {
		t.Error("names collide")
	}
}

// TestListenersDoNotRollPods: the sockets (listeners, ListenerSets, HTTP/3's UDP port) reach the
// Service, never the pod template, so a listener change is applied by the running proxies
// instead of replacing them.
func TestListenersDoNotRollPods(t *testing.T) {
	in := Input{Gateway: gateway(), Params: params("apps", "p", infrav1a1.CoxswainGatewayParametersSpec{}), Image: "img",
		DiscoveryAddress: "d:50051", TrustBundle: "PEM", ServiceAccount: "coxswain-edge"}
	template := func(sockets []Socket) (corev1.PodTemplateSpec, []corev1.ServicePort) {
		in.Sockets = sockets
		var tpl corev1.PodTemplateSpec
		var ports []corev1.ServicePort
		for _, o := range Render(in) {
			switch o := o.(type) {
			case *appsv1.Deployment:
				tpl = o.Spec.Template
			case *corev1.Service:
				ports = o.Spec.Ports
			}
		}
		return tpl, ports
	}
	before, beforePorts := template([]Socket{{80, corev1.ProtocolTCP}})
	after, afterPorts := template([]Socket{{80, corev1.ProtocolTCP}, {443, corev1.ProtocolTCP}, {443, corev1.ProtocolUDP}, {8080, corev1.ProtocolTCP}})
	if !equality.Semantic.DeepEqual(before, after) {
		t.Errorf("the pod template changed with the listeners (a rollout):\nbefore %+v\nafter  %+v", before, after)
	}
	if len(beforePorts) != 1 || len(afterPorts) != 4 {
		t.Errorf("Service ports %v then %v, want 1 then 4", beforePorts, afterPorts)
	}
	if ports := after.Spec.Containers[0].Ports; len(ports) != 1 || ports[0].Name != "admin" {
		t.Errorf("container ports %v, want only admin", ports)
	}
}
