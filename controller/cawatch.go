package controller

import (
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	certlisters "k8s.io/client-go/listers/certificates/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/coxswain-labs/coxswain/controller/translator"
)

// caWatch watches the objects caCertificateRefs name: ConfigMaps (their ca.crt only) and, where
// the cluster serves certificates.k8s.io/v1, ClusterTrustBundles.
type caWatch struct {
	factory     informers.SharedInformerFactory
	configMaps  corelisters.ConfigMapLister
	bundles     certlisters.ClusterTrustBundleLister
	bundlesInf  cache.SharedIndexInformer
	bundlesOn   bool // the cluster serves ClusterTrustBundles and they are watched
	configMapIn cache.SharedIndexInformer
}

var clusterTrustBundles = certificatesv1.SchemeGroupVersion.WithResource("clustertrustbundles")

// newCAWatch makes the informers; ev hears of every change. A ConfigMap is kept with its ca.crt
// key alone: every namespace has ConfigMaps, few of them CAs, and the rest of their data is none
// of the controller's business.
func newCAWatch(kube kubernetes.Interface, ev events) (*caWatch, error) {
	w := &caWatch{factory: informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTransform(caOnly))}
	cms := w.factory.Core().V1().ConfigMaps()
	w.configMaps, w.configMapIn = cms.Lister(), cms.Informer()
	if _, err := w.configMapIn.AddEventHandler(changeHandler(changeConfig, ev, caChanged)); err != nil {
		return nil, err
	}
	ctbs := w.factory.Certificates().V1().ClusterTrustBundles()
	w.bundles, w.bundlesInf = ctbs.Lister(), ctbs.Informer()
	if _, err := w.bundlesInf.AddEventHandler(changeHandler(changeConfig, ev, resourceVersionChanged)); err != nil {
		return nil, err
	}
	return w, nil
}

// start runs the informers; ClusterTrustBundles only when the API server serves them (GA in
// Kubernetes 1.37; an older cluster has them at most in beta, off by default). It returns what
// to wait for.
func (w *caWatch) start(stop <-chan struct{}, d discovery.DiscoveryInterface) []cache.InformerSynced {
	synced := []cache.InformerSynced{w.configMapIn.HasSynced}
	if served(d, clusterTrustBundles) {
		w.bundlesOn = true
		go w.bundlesInf.Run(stop)
		synced = append(synced, w.bundlesInf.HasSynced)
	}
	go w.configMapIn.Run(stop)
	return synced
}

// fill lists the caches into s.
func (w *caWatch) fill(s *translator.Store) error {
	var err error
	if s.ConfigMaps, err = w.configMaps.List(labels.Everything()); err != nil || !w.bundlesOn {
		return err
	}
	s.ClusterTrustBundles, err = w.bundles.List(labels.Everything())
	return err
}

// caOnly keeps of a ConfigMap its metadata (stripUnread) and its ca.crt.
func caOnly(obj any) (any, error) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return stripUnread(obj)
	}
	out := &corev1.ConfigMap{TypeMeta: cm.TypeMeta, ObjectMeta: cm.ObjectMeta}
	_, _ = stripUnread(out) // the last-applied annotation would hold the whole Data again
	if v, ok := cm.Data[translator.CACertificateKey]; ok {
		out.Data = map[string]string{translator.CACertificateKey: v}
	}
	return out, nil
}

// caChanged ignores the updates of a ConfigMap that leave its ca.crt (all the cache keeps) as it
// was: most ConfigMaps hold no CA, and those that change often (leader locks, caches) never do.
func caChanged(old, cur any) bool {
	o, c := old.(*corev1.ConfigMap), cur.(*corev1.ConfigMap)
	return o.Data[translator.CACertificateKey] != c.Data[translator.CACertificateKey]
}
