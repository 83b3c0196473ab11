package dedicated

import (
	"errors"
	"fmt"
	"strings"

	infrav1a1 "github.com/coxswain-labs/coxswain/modules/api/infrastructure/v1alpha1"
)

// controllerFlags are the proxy flags the controller sets itself; extraArgs may not repeat them,
// since a second --gateway or --token-file would point the proxy at another identity.
var controllerFlags = []string{"--gateway", "--discovery-address", "--token-file", "--trust-bundle", "--node-name"}

// Validate checks what the schema cannot, or what a CRD installed without its CEL rules would
// let through: nothing may give the proxy pods host access or privilege. Each problem names the
// field ("spec.pod.volumes[0].hostPath: ..."); all of them are joined.
func Validate(spec *infrav1a1.CoxswainGatewayParametersSpec) error {
	var errs []error
	bad := func(field, format string, a ...any) {
		errs = append(errs, fmt.Errorf("spec.%s: %s", field, fmt.Sprintf(format, a...)))
	}
	if spec.Replicas != nil && spec.Autoscaling != nil {
		bad("replicas", "replicas and autoscaling are mutually exclusive")
	}
	if spec.Replicas != nil && *spec.Replicas < 0 {
		bad("replicas", "must not be negative")
	}
	if a := spec.Autoscaling; a != nil {
		if a.MaxReplicas < 1 {
			bad("autoscaling.maxReplicas", "must be at least 1")
		}
		if a.MinReplicas != nil && (*a.MinReplicas < 1 || *a.MinReplicas > a.MaxReplicas) {
			bad("autoscaling.minReplicas", "must be between 1 and maxReplicas (%d)", a.MaxReplicas)
		}
		if a.TargetCPUUtilizationPercentage != nil && *a.TargetCPUUtilizationPercentage < 1 {
			bad("autoscaling.targetCPUUtilizationPercentage", "must be at least 1")
		}
	}
	if p := spec.PodDisruptionBudget; p != nil && (p.MinAvailable == nil) == (p.MaxUnavailable == nil) {
		bad("podDisruptionBudget", "exactly one of minAvailable and maxUnavailable must be set")
	}
	if spec.Image != nil && strings.TrimSpace(*spec.Image) == "" {
		bad("image", "must not be empty")
	}
	for i, arg := range spec.ExtraArgs {
		name, _, _ := strings.Cut(arg, "=")
		for _, f := range controllerFlags {
			if name == f || name == "-"+strings.TrimPrefix(f, "--") {
				bad(fmt.Sprintf("extraArgs[%d]", i), "%s is set by the controller", f)
			}
		}
	}
	if p := spec.Pod; p != nil {
		errs = append(errs, validatePod(p)...)
	}
	return joinErrors(errs)
}

// joinErrors is errors.Join on one line: the message goes into a status condition.
func joinErrors(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return fmt.Errorf("%w", errors.New(strings.Join(msgs, "; ")))
}

// validatePod refuses the pod template overrides that would escape the proxy's sandbox. There is
// no hostNetwork, hostPID or hostIPC field at all, so those cannot be asked for.
func validatePod(p *infrav1a1.PodSettings) []error {
	var errs []error
	bad := func(field, msg string) { errs = append(errs, fmt.Errorf("spec.pod.%s: %s", field, msg)) }
	for i, v := range p.Volumes {
		if v.HostPath != nil {
			bad(fmt.Sprintf("volumes[%d].hostPath", i), "hostPath volumes are not allowed")
		}
		if v.Name == volToken || v.Name == volTrust {
			bad(fmt.Sprintf("volumes[%d].name", i), fmt.Sprintf("%q is the controller's own volume", v.Name))
		}
	}
	for i, m := range p.VolumeMounts {
		if strings.HasPrefix(m.MountPath, mountRoot) {
			bad(fmt.Sprintf("volumeMounts[%d].mountPath", i), "must not be under "+mountRoot+" (the discovery credentials)")
		}
	}
	if sc := p.SecurityContext; sc != nil {
		if sc.RunAsNonRoot != nil && !*sc.RunAsNonRoot {
			bad("securityContext.runAsNonRoot", "must not be false: the proxy runs as a non-root user")
		}
		if sc.RunAsUser != nil && *sc.RunAsUser == 0 {
			bad("securityContext.runAsUser", "must not be 0 (root)")
		}
	}
	if sc := p.ContainerSecurityContext; sc != nil {
		if sc.Privileged != nil && *sc.Privileged {
			bad("containerSecurityContext.privileged", "privileged containers are not allowed")
		}
		if sc.AllowPrivilegeEscalation != nil && *sc.AllowPrivilegeEscalation {
			bad("containerSecurityContext.allowPrivilegeEscalation", "privilege escalation is not allowed")
		}
		if sc.Capabilities != nil && len(sc.Capabilities.Add) > 0 {
			bad("containerSecurityContext.capabilities.add", "adding capabilities is not allowed (every capability is dropped)")
		}
		if sc.RunAsNonRoot != nil && !*sc.RunAsNonRoot {
			bad("containerSecurityContext.runAsNonRoot", "must not be false: the proxy runs as a non-root user")
		}
		if sc.RunAsUser != nil && *sc.RunAsUser == 0 {
			bad("containerSecurityContext.runAsUser", "must not be 0 (root)")
		}
		if sc.ReadOnlyRootFilesystem != nil && !*sc.ReadOnlyRootFilesystem {
			bad("containerSecurityContext.readOnlyRootFilesystem", "must not be false: the root filesystem is read-only")
		}
		if sc.ProcMount != nil && *sc.ProcMount != "" && *sc.ProcMount != "Default" {
			bad("containerSecurityContext.procMount", "only Default is allowed")
		}
	}
	return errs
}
