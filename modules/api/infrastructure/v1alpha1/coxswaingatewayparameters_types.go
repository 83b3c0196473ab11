package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// CoxswainGatewayParameters runs a Gateway on a proxy pool of its own (dedicated mode). A
// Gateway names one in spec.infrastructure.parametersRef (group gateway.coxswain-labs.dev, kind
// CoxswainGatewayParameters, in the Gateway's namespace); a GatewayClass names one in
// spec.parametersRef (with its namespace) as the default of every Gateway of the class. A
// Gateway's own reference replaces the class's entirely: the two are not merged.
//
// For each such Gateway the controller creates and owns a Deployment running `coxswain proxy
// --gateway <namespace>/<name>`, a Service whose ports are the Gateway's listener ports, the
// proxies' ServiceAccount (the identity discovery admits for that Gateway), a copy of the
// discovery trust bundle, and optionally a HorizontalPodAutoscaler and a PodDisruptionBudget.
// They are deleted with the Gateway (owner references).
//
// What the proxies may not be given is refused twice: by the schema below (CEL) and by the
// controller, which sets Accepted=False reason InvalidParameters on the Gateway naming the field:
// there is no host network field at all, and no hostPath volume, privileged container, privilege
// escalation, added capability, root user or writable root filesystem.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=coxswain,shortName=cgwp
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Service",type=string,JSONPath=`.spec.service.type`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type CoxswainGatewayParameters struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is how a dedicated Gateway's proxies are deployed. An empty spec is valid: two
	// replicas of the controller's --proxy-image behind a LoadBalancer Service.
	// +optional
	Spec CoxswainGatewayParametersSpec `json:"spec,omitempty"`
}

// CoxswainGatewayParametersSpec is what a CoxswainGatewayParameters says.
//
// +kubebuilder:validation:XValidation:rule="!(has(self.replicas) && has(self.autoscaling))",message="replicas and autoscaling are mutually exclusive"
type CoxswainGatewayParametersSpec struct {
	// Replicas is the number of proxy pods (2 when neither this nor autoscaling is set).
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	Replicas *int32 `json:"replicas,omitempty"`

	// Autoscaling gives the Deployment a HorizontalPodAutoscaler on CPU instead of a fixed count.
	// +optional
	Autoscaling *Autoscaling `json:"autoscaling,omitempty"`

	// Image replaces the controller's --proxy-image for these proxies. The image must hold the
	// coxswain binary as its entrypoint, of a version that speaks the controller's discovery
	// protocol.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Image *string `json:"image,omitempty"`

	// ImagePullPolicy of the proxy container (IfNotPresent when unset).
	// +optional
	// +kubebuilder:validation:Enum=Always;IfNotPresent;Never
	ImagePullPolicy *corev1.PullPolicy `json:"imagePullPolicy,omitempty"`

	// ExtraArgs are appended to the proxy's command line (e.g. "--log-level=debug"). The flags the
	// controller sets (--gateway, --discovery-address, --token-file, --trust-bundle) are refused.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=1024
	ExtraArgs []string `json:"extraArgs,omitempty"`

	// Resources of the proxy container (requests cpu 100m, memory 64Mi, limit memory 1Gi when
	// unset).
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`

	// NodeSelector of the proxy pods.
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`

	// Tolerations of the proxy pods.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// Affinity of the proxy pods.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`

	// TopologySpreadConstraints of the proxy pods. A constraint without a labelSelector selects
	// this Gateway's proxy pods.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`

	// PodDisruptionBudget, when set, gives the proxy pods one.
	// +optional
	PodDisruptionBudget *PodDisruptionBudget `json:"podDisruptionBudget,omitempty"`

	// Service is how the Gateway's Service is exposed.
	// +optional
	Service *ServiceSettings `json:"service,omitempty"`

	// Pod holds what else lands on the proxy pod template.
	// +optional
	Pod *PodSettings `json:"pod,omitempty"`
}

// Autoscaling is a HorizontalPodAutoscaler (autoscaling/v2) on the proxies' CPU.
//
// +kubebuilder:validation:XValidation:rule="!has(self.minReplicas) || self.minReplicas <= self.maxReplicas",message="minReplicas must not exceed maxReplicas"
type Autoscaling struct {
	// MinReplicas is the fewest proxy pods (1 when unset).
	// +optional
	// +kubebuilder:validation:Minimum=1
	MinReplicas *int32 `json:"minReplicas,omitempty"`

	// MaxReplicas is the most proxy pods.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	MaxReplicas int32 `json:"maxReplicas"`

	// TargetCPUUtilizationPercentage is the average CPU use, in percent of the requests, the
	// autoscaler aims at (80 when unset). The proxy container must request CPU (it does by
	// default).
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	TargetCPUUtilizationPercentage *int32 `json:"targetCPUUtilizationPercentage,omitempty"`
}

// PodDisruptionBudget is a policy/v1 PodDisruptionBudget over the proxy pods: exactly one of
// minAvailable and maxUnavailable.
//
// +kubebuilder:validation:XValidation:rule="has(self.minAvailable) != has(self.maxUnavailable)",message="exactly one of minAvailable and maxUnavailable must be set"
type PodDisruptionBudget struct {
	// MinAvailable pods (a count or a percentage).
	// +optional
	MinAvailable *intstr.IntOrString `json:"minAvailable,omitempty"`
	// MaxUnavailable pods (a count or a percentage).
	// +optional
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
}

// ServiceSettings shape the Gateway's Service.
type ServiceSettings struct {
	// Type of the Service (LoadBalancer when unset).
	// +optional
	// +kubebuilder:validation:Enum=ClusterIP;NodePort;LoadBalancer
	Type *corev1.ServiceType `json:"type,omitempty"`

	// Annotations of the Service (e.g. a cloud load balancer's settings). They are applied over
	// the Gateway's spec.infrastructure.annotations.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`

	// ExternalTrafficPolicy of a LoadBalancer or NodePort Service; Local keeps client source
	// addresses.
	// +optional
	// +kubebuilder:validation:Enum=Cluster;Local
	ExternalTrafficPolicy *corev1.ServiceExternalTrafficPolicy `json:"externalTrafficPolicy,omitempty"`

	// LoadBalancerClass of a LoadBalancer Service (immutable once set, as Kubernetes has it).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	LoadBalancerClass *string `json:"loadBalancerClass,omitempty"`
}

// PodSettings are the proxy pod template's extras. Nothing here can give the proxy host
// access or privilege: see the kind's description.
type PodSettings struct {
	// Labels added to the pods (the reserved app.kubernetes.io and gateway.networking.k8s.io
	// keys cannot be overridden).
	// +optional
	Labels map[string]string `json:"labels,omitempty"`

	// Annotations added to the pods.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`

	// PriorityClassName of the pods.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	PriorityClassName *string `json:"priorityClassName,omitempty"`

	// SecurityContext replaces the pod security context (default: run as 65532:65532, non-root,
	// seccomp RuntimeDefault, unprivileged ports from 0). runAsNonRoot false and runAsUser 0 are
	// refused.
	// +optional
	SecurityContext *corev1.PodSecurityContext `json:"securityContext,omitempty"`

	// ContainerSecurityContext is merged over the proxy container's (default: no privilege
	// escalation, read-only root filesystem, every capability dropped).
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.privileged) || !self.privileged",message="privileged is not allowed"
	// +kubebuilder:validation:XValidation:rule="!has(self.allowPrivilegeEscalation) || !self.allowPrivilegeEscalation",message="allowPrivilegeEscalation is not allowed"
	// +kubebuilder:validation:XValidation:rule="!has(self.capabilities) || !has(self.capabilities.add) || size(self.capabilities.add) == 0",message="capabilities.add is not allowed"
	ContainerSecurityContext *corev1.SecurityContext `json:"containerSecurityContext,omitempty"`

	// Volumes added to the pod (for VolumeMounts): no hostPath.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.all(v, !has(v.hostPath))",message="hostPath volumes are not allowed"
	Volumes []corev1.Volume `json:"volumes,omitempty"`

	// VolumeMounts added to the proxy container.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	VolumeMounts []corev1.VolumeMount `json:"volumeMounts,omitempty"`

	// ImagePullSecrets of the pods.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`
}

// +kubebuilder:object:root=true

// CoxswainGatewayParametersList is a list of CoxswainGatewayParameters.
type CoxswainGatewayParametersList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CoxswainGatewayParameters `json:"items"`
}
