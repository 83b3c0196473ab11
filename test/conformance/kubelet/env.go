package kubelet

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// baseEnv is what an image's environment would hold before the container's own variables.
var baseEnv = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}

// containerSpec resolves how to start container c of pod: its workload, env and args. Paths under
// a volume's mountPath in env values and args become paths in the volume's directory, since the
// processes share the harness's filesystem.
func (k *Kubelet) containerSpec(ctx context.Context, pod *corev1.Pod, c *corev1.Container, ip netip.Addr,
	volumes map[string]string, dir string) (*containerSpec, error) {
	if len(c.Command) > 0 {
		return nil, fmt.Errorf("container %s: command (an entrypoint override) is not supported", c.Name)
	}
	w, err := k.cfg.Workloads.lookup(c.Image)
	if err != nil {
		return nil, fmt.Errorf("container %s: %w", c.Name, err)
	}
	mounts, err := mountDirs(c.VolumeMounts, volumes)
	if err != nil {
		return nil, fmt.Errorf("container %s: %w", c.Name, err)
	}
	vars, err := k.resolveEnv(ctx, pod, c, ip)
	if err != nil {
		return nil, fmt.Errorf("container %s: %w", c.Name, err)
	}
	envMap := map[string]string{}
	env := append([]string(nil), baseEnv...)
	env = append(env, "HOSTNAME="+pod.Name)
	for _, v := range vars {
		v.value = rewritePath(v.value, mounts)
		envMap[v.name] = v.value
		env = append(env, v.name+"="+v.value)
	}
	args := make([]string, 0, len(c.Args))
	for _, a := range c.Args {
		args = append(args, rewritePath(expand(a, envMap), mounts))
	}
	return &containerSpec{
		name: c.Name, image: c.Image, binary: w.Binary, args: args, env: env, dir: dir,
		ports: w.Ports(envMap),
	}, nil
}

type envVar struct{ name, value string }

// resolveEnv computes the container's variables in order: envFrom, then env, each value with
// $(VAR) references to earlier variables expanded, as the kubelet does.
func (k *Kubelet) resolveEnv(ctx context.Context, pod *corev1.Pod, c *corev1.Container, ip netip.Addr) ([]envVar, error) {
	var out []envVar
	defined := map[string]string{}
	set := func(name, value string) {
		out = append(out, envVar{name, value})
		defined[name] = value
	}
	for _, from := range c.EnvFrom {
		data, err := k.envFromData(ctx, pod.Namespace, from)
		if err != nil {
			return nil, err
		}
		keys := make([]string, 0, len(data))
		for key := range data {
			keys = append(keys, key)
		}
		sort.Strings(keys)
		for _, key := range keys {
			set(from.Prefix+key, string(data[key]))
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			set(e.Name, expand(e.Value, defined))
			continue
		}
		v, err := k.envValueFrom(ctx, pod, e.ValueFrom, ip)
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", e.Name, err)
		}
		set(e.Name, v)
	}
	return out, nil
}

func (k *Kubelet) envFromData(ctx context.Context, ns string, from corev1.EnvFromSource) (map[string][]byte, error) {
	switch {
	case from.SecretRef != nil:
		return k.secretData(ctx, ns, from.SecretRef.Name, from.SecretRef.Optional)
	case from.ConfigMapRef != nil:
		return k.configMapData(ctx, ns, from.ConfigMapRef.Name, from.ConfigMapRef.Optional)
	}
	return nil, nil
}

func (k *Kubelet) envValueFrom(ctx context.Context, pod *corev1.Pod, from *corev1.EnvVarSource, ip netip.Addr) (string, error) {
	switch {
	case from.FieldRef != nil:
		return fieldRef(pod, from.FieldRef.FieldPath, k.cfg.NodeIP, ip)
	case from.SecretKeyRef != nil:
		r := from.SecretKeyRef
		data, err := k.secretData(ctx, pod.Namespace, r.Name, r.Optional)
		return keyOf(data, r.Key, r.Optional, err)
	case from.ConfigMapKeyRef != nil:
		r := from.ConfigMapKeyRef
		data, err := k.configMapData(ctx, pod.Namespace, r.Name, r.Optional)
		return keyOf(data, r.Key, r.Optional, err)
	}
	return "", fmt.Errorf("only fieldRef, secretKeyRef and configMapKeyRef are supported")
}

func keyOf(data map[string][]byte, key string, optional *bool, err error) (string, error) {
	if err != nil {
		return "", err
	}
	v, ok := data[key]
	if !ok && (optional == nil || !*optional) {
		return "", errorf("key %q not found", key)
	}
	return string(v), nil
}

// fieldRef resolves the downward API fields an env var may name.
func fieldRef(pod *corev1.Pod, path string, hostIP, podIP netip.Addr) (string, error) {
	if key, ok := subscript(path, "metadata.labels"); ok {
		return pod.Labels[key], nil
	}
	if key, ok := subscript(path, "metadata.annotations"); ok {
		return pod.Annotations[key], nil
	}
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP", "status.hostIPs":
		return hostIP.String(), nil
	case "status.podIP", "status.podIPs":
		return podIP.String(), nil
	}
	return "", fmt.Errorf("fieldRef %q is not supported", path)
}

// subscript parses `prefix['key']`.
func subscript(path, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(path, prefix+"['")
	if !ok {
		return "", false
	}
	return strings.CutSuffix(rest, "']")
}

// expand replaces $(NAME) with defined[NAME] and $$ with $; an undefined reference stays as written.
func expand(s string, defined map[string]string) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+end]
			if v, ok := defined[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+end+1])
			}
			i += end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// mount is a volume mount: where the container expects it and where it is.
type mount struct{ path, dir string }

// mountDirs maps each mountPath (longest first, so nested mounts win) to its directory.
func mountDirs(vms []corev1.VolumeMount, volumes map[string]string) ([]mount, error) {
	var out []mount
	for _, vm := range vms {
		dir, ok := volumes[vm.Name]
		if !ok {
			return nil, fmt.Errorf("volume mount %s: no such volume", vm.Name)
		}
		if vm.SubPath != "" {
			dir = filepath.Join(dir, vm.SubPath)
		}
		out = append(out, mount{path: filepath.Clean(vm.MountPath), dir: dir})
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i].path) > len(out[j].path) })
	return out, nil
}

// rewritePath turns a path under a mountPath into the same path under the volume's directory,
// in a value or in a flag's "--name=value".
func rewritePath(v string, mounts []mount) string {
	if name, val, ok := strings.Cut(v, "="); ok && strings.HasPrefix(name, "-") {
		return name + "=" + rewritePath(val, mounts)
	}
	for _, m := range mounts {
		if v == m.path {
			return m.dir
		}
		if rest, ok := strings.CutPrefix(v, m.path+"/"); ok {
			return filepath.Join(m.dir, rest)
		}
	}
	return v
}
