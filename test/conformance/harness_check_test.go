package conformance

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/coxswain-labs/coxswain/test/conformance/harness"
)

// checkHarness proves the cluster does what the suite relies on before the suite relies on it:
// a Deployment's pod is named <deployment>-<hash>-<random>, becomes Ready with an address of the
// pod range once its HTTP and HTTPS ports listen (the certificate from a Secret volume, the pod
// name from a fieldRef), is published in its Service's EndpointSlice, answers echo-basic's JSON,
// answers on its Service's cluster IP through the service proxy (and a port the Service does not
// have is refused), has its log line readable through pods/log, and is deleted with its
// namespace. And the static addresses the suite is given are what they are said to be.
func checkHarness(t *testing.T, c *harness.Cluster) {
	checkStaticAddresses(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	kube := c.Env.Kube
	ns := "harness-check"
	must(t, create(ctx, kube, ns))
	t.Cleanup(func() { _ = kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })

	pod := waitPod(ctx, t, kube, ns)
	if !regexp.MustCompile(`^echo-[a-z0-9]+-[a-z0-9]{5}$`).MatchString(pod.Name) {
		t.Errorf("pod name %q does not look like <deployment>-<hash>-<random>", pod.Name)
	}
	ip, err := netip.ParseAddr(pod.Status.PodIP)
	if err != nil || !netip.MustParsePrefix(harness.PodRange).Contains(ip) || len(pod.Status.PodIPs) != 1 ||
		pod.Status.PodIPs[0].IP != pod.Status.PodIP {
		t.Fatalf("pod address %q / %v not one of %s", pod.Status.PodIP, pod.Status.PodIPs, harness.PodRange)
	}
	waitEndpoint(ctx, t, kube, ns, ip.String())

	// Straight to the pod, as the proxy dials it.
	var echo struct{ Pod, Namespace, Path string }
	res := get(t, &http.Client{Timeout: 5 * time.Second}, fmt.Sprintf("http://%s:3000/harness-check", ip))
	must(t, json.Unmarshal(res, &echo))
	if echo.Pod != pod.Name || echo.Namespace != ns || echo.Path != "/harness-check" {
		t.Errorf("echo answered %+v", echo)
	}
	insecure := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}}} //nolint:gosec // self-signed test cert
	get(t, insecure, fmt.Sprintf("https://%s:8443/tls", ip))
	// Through the Service's cluster IP, as the suite reaches a shared Gateway's VIP Service.
	svc, err := kube.CoreV1().Services(ns).Get(ctx, "echo", metav1.GetOptions{})
	must(t, err)
	var viaService struct{ Pod string }
	err = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) {
		res, err := (&http.Client{Timeout: 2 * time.Second}).Get(fmt.Sprintf("http://%s:8080/via-service", svc.Spec.ClusterIP))
		if err != nil {
			return false, nil // until the service proxy has the endpoint
		}
		defer res.Body.Close()
		return res.StatusCode == http.StatusOK && json.NewDecoder(res.Body).Decode(&viaService) == nil, nil
	})
	if err != nil || viaService.Pod != pod.Name {
		t.Fatalf("GET http://%s:8080 (Service echo): %v, answered by %q, want %s (rules in %s/serviceproxy.nft)",
			svc.Spec.ClusterIP, err, viaService.Pod, pod.Name, c.Artifacts)
	}
	if conn, err := net.DialTimeout("tcp", net.JoinHostPort(svc.Spec.ClusterIP, "8081"), 2*time.Second); err == nil {
		conn.Close()
		t.Errorf("%s:8081, a port Service echo does not have, accepted a connection", svc.Spec.ClusterIP)
	} else if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("%s:8081, a port Service echo does not have: %v, want connection refused", svc.Spec.ClusterIP, err)
	}

	logs, err := kube.CoreV1().Pods(ns).GetLogs(pod.Name, &corev1.PodLogOptions{Container: "echo"}).DoRaw(ctx)
	must(t, err)
	if !strings.Contains(string(logs), "Echoing back request made to /harness-check") {
		t.Errorf("pods/log has no echo line:\n%s", logs)
	}

	must(t, kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}))
	err = wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("namespace %s not deleted: %v", ns, err)
	}
}

// checkStaticAddresses checks that the suite's usable static address is usable and its unusable
// one is not, as Coxswain will find them. In shared mode a static IPAddress pins the VIP
// Service's cluster IP, so the API server decides: a dry-run Service asking for each is accepted
// and refused. In pool mode the proxy binds it in this network namespace: the usable one binds,
// the unusable one fails with EADDRNOTAVAIL.
func checkStaticAddresses(t *testing.T, c *harness.Cluster) {
	if c.Provisioning == harness.ProvisioningShared {
		for addr, usable := range map[string]bool{c.UsableAddress: true, harness.UnusableAddress: false} {
			_, err := c.Env.Kube.CoreV1().Services("default").Create(context.Background(), &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: "static-address-check"},
				Spec:       corev1.ServiceSpec{ClusterIP: addr, Ports: []corev1.ServicePort{{Port: 80}}},
			}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if usable && err != nil {
				t.Fatalf("usable address %s refused as a cluster IP: %v", addr, err)
			}
			if !usable && err == nil {
				t.Fatalf("unusable address %s accepted as a cluster IP", addr)
			}
		}
		return
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(c.UsableAddress, "0"))
	if err != nil {
		t.Fatalf("usable address %s cannot be bound: %v", c.UsableAddress, err)
	}
	must(t, ln.Close())
	ln, err = net.Listen("tcp", net.JoinHostPort(harness.UnusableAddress, "0"))
	if err == nil {
		_ = ln.Close()
		t.Fatalf("unusable address %s can be bound", harness.UnusableAddress)
	}
	if !errors.Is(err, syscall.EADDRNOTAVAIL) {
		t.Fatalf("unusable address %s: %v, want EADDRNOTAVAIL", harness.UnusableAddress, err)
	}
}

func create(ctx context.Context, kube kubernetes.Interface, ns string) error {
	certPEM, keyPEM, err := selfSignedPEM("echo." + ns)
	if err != nil {
		return err
	}
	labels := map[string]string{"app": "echo"}
	fieldEnv := func(name, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
	}
	objs := []func() error{
		func() error {
			_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: "cert"}, Type: corev1.SecretTypeTLS,
				Data: map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM},
			}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := kube.CoreV1().Services(ns).Create(ctx, &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: "echo"},
				Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{
					{Name: "http", Port: 8080, TargetPort: intstr.FromInt32(3000)}}},
			}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := kube.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{Name: "echo"},
				Spec: appsv1.DeploymentSpec{
					Selector: &metav1.LabelSelector{MatchLabels: labels},
					Template: corev1.PodTemplateSpec{
						ObjectMeta: metav1.ObjectMeta{Labels: labels},
						Spec: corev1.PodSpec{
							Containers: []corev1.Container{{
								Name: "echo", Image: "registry.k8s.io/gateway-api/echo-basic:v1.5.1",
								Env: []corev1.EnvVar{fieldEnv("POD_NAME", "metadata.name"), fieldEnv("NAMESPACE", "metadata.namespace"),
									{Name: "TLS_SERVER_CERT", Value: "/etc/cert/tls.crt"}, {Name: "TLS_SERVER_PRIVKEY", Value: "/etc/cert/tls.key"}},
								VolumeMounts: []corev1.VolumeMount{{Name: "cert", MountPath: "/etc/cert"}},
							}},
							Volumes: []corev1.Volume{{Name: "cert", VolumeSource: corev1.VolumeSource{
								Secret: &corev1.SecretVolumeSource{SecretName: "cert"}}}},
						},
					},
				},
			}, metav1.CreateOptions{})
			return err
		},
	}
	for _, f := range objs {
		if err := f(); err != nil {
			return err
		}
	}
	return nil
}

func waitPod(ctx context.Context, t *testing.T, kube kubernetes.Interface, ns string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil || len(pods.Items) != 1 {
			return false, nil
		}
		for _, c := range pods.Items[0].Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				pod = &pods.Items[0]
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no Ready pod in %s: %v", ns, err)
	}
	return pod
}

func waitEndpoint(ctx context.Context, t *testing.T, kube kubernetes.Interface, ns, ip string) {
	t.Helper()
	err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		list, err := kube.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=echo"})
		if err != nil {
			return false, nil
		}
		for _, s := range list.Items {
			for _, e := range s.Endpoints {
				if len(e.Addresses) > 0 && e.Addresses[0] == ip && e.Conditions.Ready != nil && *e.Conditions.Ready {
					return true, nil
				}
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("pod %s not a ready endpoint of Service %s/echo: %v", ip, ns, err)
	}
}

func get(t *testing.T, client *http.Client, url string) []byte {
	t.Helper()
	res, err := client.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v: %s", url, res.StatusCode, err, body)
	}
	return body
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func selfSignedPEM(name string) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}
