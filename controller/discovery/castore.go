package discovery

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// Keys of the CA Secret and of the trust-bundle ConfigMap.
const (
	CACertKey = "ca.crt"
	CAKeyKey  = "ca.key"
	BundleKey = "ca.crt"
)

var managedBy = map[string]string{"app.kubernetes.io/managed-by": "coxswain-controller"}

// EnsureCA loads the self-managed CA from the Secret namespace/name, creating it first when it
// does not exist. Every replica calls it at start; when two create at once, the loser reads the
// winner's, so all replicas sign with one CA.
func EnsureCA(ctx context.Context, kube kubernetes.Interface, namespace, name, trustDomain string) (*CA, error) {
	secrets := kube.CoreV1().Secrets(namespace)
	sec, err := secrets.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		certPEM, keyPEM, genErr := NewCA(trustDomain, time.Now())
		if genErr != nil {
			return nil, fmt.Errorf("generating the CA: %w", genErr)
		}
		sec, err = secrets.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: managedBy},
			Type:       corev1.SecretTypeOpaque,
			Data:       map[string][]byte{CACertKey: certPEM, CAKeyKey: keyPEM},
		}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			sec, err = secrets.Get(ctx, name, metav1.GetOptions{})
		}
	}
	if err != nil {
		return nil, fmt.Errorf("CA Secret %s/%s: %w", namespace, name, err)
	}
	ca, err := LoadCA(trustDomain, sec.Data[CACertKey], sec.Data[CAKeyKey])
	if err != nil {
		return nil, fmt.Errorf("CA Secret %s/%s: %w", namespace, name, err)
	}
	return ca, nil
}

// LoadCAFiles loads an operator-provided CA from PEM files (a mounted Secret, typically).
func LoadCAFiles(trustDomain, certFile, keyFile string) (*CA, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, err
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, err
	}
	return LoadCA(trustDomain, certPEM, keyPEM)
}

// PublishBundle makes the ConfigMap namespace/name hold bundle under BundleKey, creating or
// updating it. Proxies mount it as their trust-bundle file.
func PublishBundle(ctx context.Context, kube kubernetes.Interface, namespace, name string, bundle []byte) error {
	cms := kube.CoreV1().ConfigMaps(namespace)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := cms.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = cms.Create(ctx, &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: managedBy},
				Data:       map[string]string{BundleKey: string(bundle)},
			}, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return apierrors.NewConflict(corev1.Resource("configmaps"), name, err)
			}
			return err
		}
		if err != nil {
			return err
		}
		if bytes.Equal([]byte(cm.Data[BundleKey]), bundle) {
			return nil
		}
		cm = cm.DeepCopy()
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[BundleKey] = string(bundle)
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		return err
	})
}
