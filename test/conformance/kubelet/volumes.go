package kubelet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// apiTimeout bounds each API call the kubelet makes.
const apiTimeout = 30 * time.Second

// materializeVolumes writes the pod's volumes under dir/volumes and returns each volume's
// directory by name. A Secret or ConfigMap that does not exist (yet) is errWaiting, unless the
// volume is optional.
func (k *Kubelet) materializeVolumes(ctx context.Context, pod *corev1.Pod, dir string) (map[string]string, error) {
	out := map[string]string{}
	for _, v := range pod.Spec.Volumes {
		vdir := filepath.Join(dir, "volumes", v.Name)
		var files map[string][]byte
		var items []corev1.KeyToPath
		var mode *int32
		switch {
		case v.Secret != nil:
			data, err := k.secretData(ctx, pod.Namespace, v.Secret.SecretName, v.Secret.Optional)
			if err != nil {
				return nil, fmt.Errorf("volume %s: %w", v.Name, err)
			}
			files, items, mode = data, v.Secret.Items, v.Secret.DefaultMode
		case v.ConfigMap != nil:
			data, err := k.configMapData(ctx, pod.Namespace, v.ConfigMap.Name, v.ConfigMap.Optional)
			if err != nil {
				return nil, fmt.Errorf("volume %s: %w", v.Name, err)
			}
			files, items, mode = data, v.ConfigMap.Items, v.ConfigMap.DefaultMode
		case v.EmptyDir != nil:
		case v.Projected != nil:
			if err := k.projectVolume(ctx, pod, v.Projected, vdir); err != nil {
				return nil, fmt.Errorf("volume %s: %w", v.Name, err)
			}
			out[v.Name] = vdir
			continue
		default:
			return nil, fmt.Errorf("volume %s: only secret, configMap, emptyDir and projected volumes are supported", v.Name)
		}
		if err := writeVolume(vdir, files, items, mode); err != nil {
			return nil, fmt.Errorf("volume %s: %w", v.Name, err)
		}
		out[v.Name] = vdir
	}
	return out, nil
}

func (k *Kubelet) secretData(ctx context.Context, ns, name string, optional *bool) (map[string][]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	s, err := k.cfg.Client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err) && optional != nil && *optional:
		return nil, nil
	case apierrors.IsNotFound(err):
		return nil, errorf("secret %q not found", name)
	case err != nil:
		return nil, err
	}
	return s.Data, nil
}

func (k *Kubelet) configMapData(ctx context.Context, ns, name string, optional *bool) (map[string][]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	cm, err := k.cfg.Client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err) && optional != nil && *optional:
		return nil, nil
	case apierrors.IsNotFound(err):
		return nil, errorf("configmap %q not found", name)
	case err != nil:
		return nil, err
	}
	out := map[string][]byte{}
	for key, v := range cm.Data {
		out[key] = []byte(v)
	}
	for key, v := range cm.BinaryData {
		out[key] = v
	}
	return out, nil
}

// writeVolume writes files (all keys, or only items, at their paths) into dir.
func writeVolume(dir string, files map[string][]byte, items []corev1.KeyToPath, defaultMode *int32) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if len(items) == 0 {
		keys := make([]string, 0, len(files))
		for key := range files {
			keys = append(keys, key)
		}
		sort.Strings(keys)
		for _, key := range keys {
			items = append(items, corev1.KeyToPath{Key: key, Path: key})
		}
	}
	for _, it := range items {
		data, ok := files[it.Key]
		if !ok {
			if files == nil { // an optional source that does not exist: an empty volume
				continue
			}
			return errorf("key %q not found", it.Key)
		}
		if filepath.IsAbs(it.Path) || strings.Contains(it.Path, "..") {
			return fmt.Errorf("item path %q must be relative and must not contain '..'", it.Path)
		}
		mode := os.FileMode(0o644)
		switch {
		case it.Mode != nil:
			mode = os.FileMode(*it.Mode)
		case defaultMode != nil:
			mode = os.FileMode(*defaultMode)
		}
		p := filepath.Join(dir, it.Path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, data, mode|0o600); err != nil {
			return err
		}
	}
	return nil
}

// projectVolume writes a projected volume: ServiceAccount tokens (requested from the API server
// for the pod's ServiceAccount, bound to the pod, as the kubelet does), and secret and configMap
// sources. Tokens are written once and not refreshed: a pod of the harness lives for minutes,
// far less than the shortest token the API server issues (10 minutes).
func (k *Kubelet) projectVolume(ctx context.Context, pod *corev1.Pod, pv *corev1.ProjectedVolumeSource, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, src := range pv.Sources {
		switch {
		case src.ServiceAccountToken != nil:
			tok, err := k.podToken(ctx, pod, src.ServiceAccountToken)
			if err != nil {
				return err
			}
			if err := writeVolume(dir, map[string][]byte{"token": []byte(tok)},
				[]corev1.KeyToPath{{Key: "token", Path: src.ServiceAccountToken.Path}}, pv.DefaultMode); err != nil {
				return err
			}
		case src.ConfigMap != nil:
			data, err := k.configMapData(ctx, pod.Namespace, src.ConfigMap.Name, src.ConfigMap.Optional)
			if err != nil {
				return err
			}
			if err := writeVolume(dir, data, src.ConfigMap.Items, pv.DefaultMode); err != nil {
				return err
			}
		case src.Secret != nil:
			data, err := k.secretData(ctx, pod.Namespace, src.Secret.Name, src.Secret.Optional)
			if err != nil {
				return err
			}
			if err := writeVolume(dir, data, src.Secret.Items, pv.DefaultMode); err != nil {
				return err
			}
		default:
			return errors.New("only serviceAccountToken, configMap and secret projections are supported")
		}
	}
	return nil
}

// podToken requests a token of the pod's ServiceAccount for the projection's audience, bound to
// the pod: deleting the pod invalidates it.
func (k *Kubelet) podToken(ctx context.Context, pod *corev1.Pod, p *corev1.ServiceAccountTokenProjection) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: p.ExpirationSeconds,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID},
	}}
	if p.Audience != "" {
		req.Spec.Audiences = []string{p.Audience}
	}
	tr, err := k.cfg.Client.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, sa, req, metav1.CreateOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return "", errorf("serviceaccount %q not found", sa)
	case err != nil:
		return "", fmt.Errorf("token for serviceaccount %s: %w", sa, err)
	}
	return tr.Status.Token, nil
}
