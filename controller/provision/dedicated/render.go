package dedicated

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	infrav1a1 "github.com/coxswain-labs/coxswain/modules/api/infrastructure/v1alpha1"
)

// The documented mount paths of a proxy's discovery credentials (docs/provisioning.md).
const (
	mountRoot     = "/var/run/secrets/coxswain/"
	TokenPath     = mountRoot + "discovery-token/token"
	TrustPath     = mountRoot + "trust-bundle/ca.crt"
	volToken      = "discovery-token"
	volTrust      = "trust-bundle"
	adminPort     = 9901
	proxyUID      = 65532
	TokenAudience = "coxswain-discovery"
	// TrustBundleKey is the key of the CA certificates in the trust-bundle ConfigMap.
	TrustBundleKey   = "ca.crt"
	defaultReplicas  = 2
	defaultCPUTarget = 80
)

// Component is the app.kubernetes.io/component of a dedicated pool's objects.
const Component = "dedicated-proxy"

// Input is everything Render needs; it makes no API calls.
type Input struct {
	Gateway *gwapiv1.Gateway
	Params  *infrav1a1.CoxswainGatewayParameters
	// Image is the controller's --proxy-image; spec.image replaces it.
	Image string
	// DiscoveryAddress is the host:port the proxies dial (the controller's Service).
	DiscoveryAddress string
	// TrustBundle is the PEM the discovery server's certificate chains to; it is copied into a
	// ConfigMap in the Gateway's namespace, because a pod can only mount a ConfigMap of its own
	// namespace.
	TrustBundle string
	// ServiceAccount is the name discovery admits for this Gateway's dedicated proxies
	// (discovery.DedicatedServiceAccount).
	ServiceAccount string
	// Meta are the labels and annotations every object gets (GEP-1867 over GEP-1762).
	Meta Meta
	// ServiceType is the Service's type when spec.service.type is unset (the controller's
	// --gateway-service-type); LoadBalancer when empty.
	ServiceType corev1.ServiceType
	// Sockets are the Gateway's listener sockets, the Service's ports: its own listeners', its
	// ListenerSets', and the UDP socket of each HTTPS port serving HTTP/3 (the provisioner's
	// provision.Sockets).
	Sockets []Socket
}

// Meta are labels and annotations.
type Meta struct {
	Labels, Annotations map[string]string
}

// Names of a Gateway's dedicated objects. Deployment, Service, HPA, PDB share one name; a
// name is cut to 63 characters with a hash so that it is a valid Service name and label value.
func ObjectName(gw *gwapiv1.Gateway) string { return shorten("coxswain-" + gw.Name) }
func TrustBundleName(gw *gwapiv1.Gateway) string {
	return shorten("coxswain-" + gw.Name + "-trust-bundle")
}

func shorten(s string) string {
	if len(s) <= 63 {
		return s
	}
	sum := sha256.Sum256([]byte(s))
	return s[:54] + "-" + hex.EncodeToString(sum[:])[:8]
}

// selector picks a Gateway's proxy pods; it never changes for a Gateway (a Deployment's selector
// is immutable), so it holds only the Gateway's names.
func selector(gw *gwapiv1.Gateway) map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":                 "coxswain",
		"app.kubernetes.io/component":            Component,
		"gateway.networking.k8s.io/gateway-name": shorten(gw.Name),
	}
}

// Render returns the objects of gw's dedicated proxy pool, in apply order: ServiceAccount,
// trust-bundle ConfigMap, Deployment, Service, then the HPA and the PDB when asked for.
func Render(in Input) []client.Object {
	gw, spec := in.Gateway, &in.Params.Spec
	name := ObjectName(gw)
	meta := func(n string, extraAnn map[string]string) metav1.ObjectMeta {
		m := metav1.ObjectMeta{Name: n, Namespace: gw.Namespace, Labels: maps.Clone(in.Meta.Labels), Annotations: maps.Clone(in.Meta.Annotations)}
		if m.Labels == nil {
			m.Labels = map[string]string{}
		}
		maps.Copy(m.Labels, selector(gw))
		if len(extraAnn) > 0 {
			if m.Annotations == nil {
				m.Annotations = map[string]string{}
			}
			maps.Copy(m.Annotations, extraAnn)
		}
		return m
	}
	objs := []client.Object{
		&corev1.ServiceAccount{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
			ObjectMeta: meta(in.ServiceAccount, nil),
			// The pods mount only the audience-scoped token; this account has no RBAC.
			AutomountServiceAccountToken: ptr.To(false),
		},
		&corev1.ConfigMap{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: meta(TrustBundleName(gw), nil),
			Data:       map[string]string{TrustBundleKey: in.TrustBundle},
		},
		deployment(in, meta(name, nil)),
		service(in, meta(name, serviceAnnotations(spec))),
	}
	if a := spec.Autoscaling; a != nil {
		objs = append(objs, &autoscalingv2.HorizontalPodAutoscaler{
			TypeMeta:   metav1.TypeMeta{APIVersion: "autoscaling/v2", Kind: "HorizontalPodAutoscaler"},
			ObjectMeta: meta(name, nil),
			Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
				ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: name},
				MinReplicas:    ptr.To(ptr.Deref(a.MinReplicas, 1)),
				MaxReplicas:    a.MaxReplicas,
				Metrics: []autoscalingv2.MetricSpec{{
					Type: autoscalingv2.ResourceMetricSourceType,
					Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{
						Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To(ptr.Deref(a.TargetCPUUtilizationPercentage, defaultCPUTarget)),
					}},
				}},
			},
		})
	}
	if p := spec.PodDisruptionBudget; p != nil {
		objs = append(objs, &policyv1.PodDisruptionBudget{
			TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
			ObjectMeta: meta(name, nil),
			Spec: policyv1.PodDisruptionBudgetSpec{
				MinAvailable: p.MinAvailable, MaxUnavailable: p.MaxUnavailable,
				Selector: &metav1.LabelSelector{MatchLabels: selector(gw)},
			},
		})
	}
	return objs
}

func serviceAnnotations(spec *infrav1a1.CoxswainGatewayParametersSpec) map[string]string {
	if spec.Service == nil {
		return nil
	}
	return spec.Service.Annotations
}

// Socket is one listener socket of the Gateway: a port and its transport.
type Socket struct {
	Port     int32
	Protocol corev1.Protocol
}

// servicePorts are the Service's ports, one per socket in order: a dedicated proxy binds each
// listener at its own port, so a port's targetPort is the same number.
func servicePorts(sockets []Socket) []corev1.ServicePort {
	var out []corev1.ServicePort
	for _, k := range sockets {
		out = append(out, corev1.ServicePort{
			Name: portName(k.Port, k.Protocol), Protocol: k.Protocol, Port: k.Port, TargetPort: intstr.FromInt32(k.Port),
		})
	}
	return out
}

func portName(port int32, proto corev1.Protocol) string {
	if proto == corev1.ProtocolUDP {
		return "udp-" + strconv.Itoa(int(port))
	}
	return "tcp-" + strconv.Itoa(int(port))
}

func service(in Input, om metav1.ObjectMeta) *corev1.Service {
	spec := &in.Params.Spec
	svc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: om,
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeLoadBalancer,
			Selector: selector(in.Gateway),
			Ports:    servicePorts(in.Sockets),
		},
	}
	if in.ServiceType != "" {
		svc.Spec.Type = in.ServiceType
	}
	if s := spec.Service; s != nil {
		if s.Type != nil {
			svc.Spec.Type = *s.Type
		}
		if svc.Spec.Type != corev1.ServiceTypeClusterIP {
			svc.Spec.ExternalTrafficPolicy = ptr.Deref(s.ExternalTrafficPolicy, "")
		}
		if svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
			svc.Spec.LoadBalancerClass = s.LoadBalancerClass
		}
	}
	return svc
}

func deployment(in Input, om metav1.ObjectMeta) *appsv1.Deployment {
	spec := &in.Params.Spec
	var replicas *int32
	switch {
	case spec.Autoscaling != nil:
		// The HPA owns the count; leaving it unset keeps apply from fighting it.
	case spec.Replicas != nil:
		replicas = ptr.To(*spec.Replicas)
	default:
		replicas = ptr.To(int32(defaultReplicas))
	}
	podLabels := maps.Clone(om.Labels)
	podAnn := maps.Clone(om.Annotations)
	if podAnn == nil {
		podAnn = map[string]string{}
	}
	pod := spec.Pod
	if pod == nil {
		pod = &infrav1a1.PodSettings{}
	}
	for k, v := range pod.Labels {
		if _, reserved := podLabels[k]; !reserved {
			podLabels[k] = v
		}
	}
	maps.Copy(podAnn, pod.Annotations)
	// A new bundle (CA rotation) rolls the pods, which read it at start.
	sum := sha256.Sum256([]byte(in.TrustBundle))
	podAnn["gateway.coxswain-labs.dev/trust-bundle-hash"] = hex.EncodeToString(sum[:8])

	podSpec := corev1.PodSpec{
		ServiceAccountName:           in.ServiceAccount,
		AutomountServiceAccountToken: ptr.To(false),
		SecurityContext:              podSecurity(pod.SecurityContext),
		Containers:                   []corev1.Container{container(in, pod)},
		Volumes: append([]corev1.Volume{
			{Name: volToken, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
					Audience: TokenAudience, ExpirationSeconds: ptr.To(int64(3600)), Path: "token",
				}}},
			}}},
			{Name: volTrust, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: TrustBundleName(in.Gateway)},
			}}},
		}, pod.Volumes...),
		NodeSelector:              spec.NodeSelector,
		Tolerations:               spec.Tolerations,
		Affinity:                  spec.Affinity,
		TopologySpreadConstraints: spreads(in.Gateway, spec.TopologySpreadConstraints),
		PriorityClassName:         ptr.Deref(pod.PriorityClassName, ""),
		ImagePullSecrets:          pod.ImagePullSecrets,
		// As long as the proxy's own drain (--shutdown-timeout, 15s) and a margin.
		TerminationGracePeriodSeconds: ptr.To(int64(30)),
	}
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: om,
		Spec: appsv1.DeploymentSpec{
			Replicas: replicas,
			Selector: &metav1.LabelSelector{MatchLabels: selector(in.Gateway)},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels, Annotations: podAnn},
				Spec:       podSpec,
			},
		},
	}
}

// spreads gives a constraint without a labelSelector this Gateway's pods.
func spreads(gw *gwapiv1.Gateway, in []corev1.TopologySpreadConstraint) []corev1.TopologySpreadConstraint {
	out := make([]corev1.TopologySpreadConstraint, len(in))
	for i, c := range in {
		c = *c.DeepCopy()
		if c.LabelSelector == nil {
			c.LabelSelector = &metav1.LabelSelector{MatchLabels: selector(gw)}
		}
		out[i] = c
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func podSecurity(override *corev1.PodSecurityContext) *corev1.PodSecurityContext {
	if override != nil {
		sc := override.DeepCopy()
		if sc.RunAsNonRoot == nil {
			sc.RunAsNonRoot = ptr.To(true)
		}
		return sc
	}
	return &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		RunAsUser:      ptr.To(int64(proxyUID)),
		RunAsGroup:     ptr.To(int64(proxyUID)),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		// Listeners on ports below 1024 (80, 443) are served by this non-root process.
		Sysctls: []corev1.Sysctl{{Name: "net.ipv4.ip_unprivileged_port_start", Value: "0"}},
	}
}

func container(in Input, pod *infrav1a1.PodSettings) corev1.Container {
	spec := &in.Params.Spec
	image := in.Image
	if spec.Image != nil {
		image = *spec.Image
	}
	args := []string{
		"proxy",
		"--gateway=" + in.Gateway.Namespace + "/" + in.Gateway.Name,
		"--discovery-address=" + in.DiscoveryAddress,
		"--token-file=" + TokenPath,
		"--trust-bundle=" + TrustPath,
		"--admin-address=:" + strconv.Itoa(adminPort),
	}
	args = append(args, spec.ExtraArgs...)
	// Only the admin port is declared. The listener ports are not: the proxy binds whatever its
	// snapshot names, the Service targets them by number, and a declared list would be part of
	// the pod template, so adding a listener (or a ListenerSet, or HTTP/3's UDP socket) would
	// roll every proxy pod of the Gateway instead of being applied in place.
	ports := []corev1.ContainerPort{{Name: "admin", ContainerPort: adminPort, Protocol: corev1.ProtocolTCP}}
	resources := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
	}
	if spec.Resources != nil {
		resources = *spec.Resources.DeepCopy()
	}
	sc := &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		Privileged:               ptr.To(false),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
	if o := pod.ContainerSecurityContext; o != nil {
		// Validate refused everything that loosens these; what is left (SELinux, AppArmor,
		// seccomp, user and group ids, more drops) is taken as given.
		if o.SELinuxOptions != nil {
			sc.SELinuxOptions = o.SELinuxOptions
		}
		if o.AppArmorProfile != nil {
			sc.AppArmorProfile = o.AppArmorProfile
		}
		if o.SeccompProfile != nil {
			sc.SeccompProfile = o.SeccompProfile
		}
		sc.RunAsUser, sc.RunAsGroup, sc.RunAsNonRoot = o.RunAsUser, o.RunAsGroup, o.RunAsNonRoot
		if o.Capabilities != nil {
			sc.Capabilities.Drop = append(sc.Capabilities.Drop, o.Capabilities.Drop...)
		}
	}
	return corev1.Container{
		Name:            "proxy",
		Image:           image,
		ImagePullPolicy: ptr.Deref(spec.ImagePullPolicy, corev1.PullIfNotPresent),
		Args:            args,
		Env: []corev1.EnvVar{{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{
			FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"},
		}}},
		Ports:     ports,
		Resources: resources,
		// Ready once the first snapshot is applied and its listeners are bound.
		ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromString("admin")}}},
		LivenessProbe:  &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("admin")}}},
		VolumeMounts: append([]corev1.VolumeMount{
			{Name: volToken, MountPath: mountRoot + "discovery-token", ReadOnly: true},
			{Name: volTrust, MountPath: mountRoot + "trust-bundle", ReadOnly: true},
		}, pod.VolumeMounts...),
		SecurityContext: sc,
	}
}
