// Package kubelet is the "process kubelet" of the conformance harness: a kubelet without a
// container runtime. It registers one Ready Node, binds every unscheduled pod to it (there is no
// scheduler) and runs each pod the way a kubelet with a CNI plugin would, only with local
// processes instead of containers:
//
//   - a sandbox: a process holding a network namespace of its own, wired to a bridge in the
//     harness's namespace by a veth pair and given the next address of the pod range;
//   - volumes: secret, configMap and emptyDir volumes written to the pod's directory (a pod whose
//     Secret or ConfigMap does not exist yet is retried, as the kubelet does);
//   - containers: the binary the Catalog names for the image, started inside the sandbox's
//     network namespace with the container's env resolved (values, $(VAR) references, fieldRefs,
//     secret and configMap keys) and its stdout and stderr captured for pods/log;
//   - status: Running and Ready, podIP and podIPs, written only once every port the workload
//     listens on is bound (read from the sandbox's /proc/net tables, so no probe traffic);
//   - deletion: a pod marked for deletion is stopped and then deleted for good (grace period 0,
//     UID precondition), so ReplicaSets, namespaces and the garbage collector make progress;
//   - logs: GET /containerLogs/{namespace}/{pod}/{container} over HTTPS on NodeIP:Port, which is
//     where kube-apiserver sends pods/log requests.
//
// What it does not do: images (the Catalog maps an image repository to a local binary), mount
// namespaces (env values and args under a volume's mountPath are rewritten to the volume's
// directory instead), probes, resource limits, init containers, service environment variables.
// None of them is used by the Gateway API conformance suite's workloads.
package kubelet

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"sync"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// Config is what a Kubelet needs. Every field is required.
type Config struct {
	Client kubernetes.Interface
	Log    *zap.Logger
	// NodeName is the Node registered and every pod is bound to.
	NodeName string
	// NodeIP is the Node's InternalIP; the kubelet API listens on NodeIP:Port.
	NodeIP netip.Addr
	Port   int
	// Network gives pods their addresses and network namespaces.
	Network *Network
	// Workloads says which binary runs each image.
	Workloads Catalog
	// Dir holds one directory per pod (volumes, the working directory of its processes).
	Dir string
}

// Kubelet runs the pods bound to its Node. Create it with New, then call Run.
type Kubelet struct {
	cfg   Config
	log   *zap.Logger
	queue workqueue.TypedRateLimitingInterface[string]
	pods  corelisters.PodLister

	mu sync.Mutex
	// running holds the pods started and not yet stopped, by UID; byName maps namespace/name to
	// the UID running under that name (for pods/log).
	running map[types.UID]*podRuntime
	byName  map[string]types.UID
}

// New checks cfg and returns a Kubelet.
func New(cfg Config) (*Kubelet, error) {
	var errs []error
	if cfg.Client == nil || cfg.Log == nil || cfg.Network == nil || cfg.Workloads == nil {
		errs = append(errs, errors.New("Client, Log, Network and Workloads are required"))
	}
	if cfg.NodeName == "" || !cfg.NodeIP.IsValid() || cfg.Port == 0 || cfg.Dir == "" {
		errs = append(errs, errors.New("NodeName, NodeIP, Port and Dir are required"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("kubelet config: %w", err)
	}
	return &Kubelet{
		cfg: cfg,
		log: cfg.Log,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, 5*time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "pods"}),
		running: map[types.UID]*podRuntime{},
		byName:  map[string]types.UID{},
	}, nil
}

// Run registers the Node, serves the kubelet API and syncs pods until ctx is done; then it stops
// every pod it runs. It returns once the Node is registered and the API is listening, with a
// function that waits for the shutdown.
func (k *Kubelet) Run(ctx context.Context, workers int) (wait func(), err error) {
	if err := k.registerNode(ctx); err != nil {
		return nil, err
	}
	srv, err := k.serveAPI()
	if err != nil {
		return nil, err
	}
	factory := informers.NewSharedInformerFactory(k.cfg.Client, 0)
	inf := factory.Core().V1().Pods()
	k.pods = inf.Lister()
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    k.enqueue,
		UpdateFunc: func(_, obj any) { k.enqueue(obj) },
		DeleteFunc: k.enqueue,
	}); err != nil {
		return nil, err
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.Informer().HasSynced) {
		return nil, fmt.Errorf("pod cache: %w", ctx.Err())
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for k.next(ctx) {
			}
		})
	}
	go func() {
		<-ctx.Done()
		k.queue.ShutDown()
	}()
	return func() {
		wg.Wait()
		factory.Shutdown()
		_ = srv.Close()
		k.stopAll()
	}, nil
}

func (k *Kubelet) enqueue(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err == nil {
		k.queue.Add(key)
	}
}

func (k *Kubelet) next(ctx context.Context) bool {
	key, quit := k.queue.Get()
	if quit {
		return false
	}
	defer k.queue.Done(key)
	err := k.sync(ctx, key)
	switch {
	case err == nil:
		k.queue.Forget(key)
	case errors.Is(err, errWaiting):
		k.log.Debug("pod waits", zap.String("pod", key), zap.Error(err))
		k.queue.AddRateLimited(key)
	case ctx.Err() != nil:
	default:
		k.log.Warn("syncing pod", zap.String("pod", key), zap.Error(err))
		k.queue.AddRateLimited(key)
	}
	return true
}

// sync makes one pod's processes match its object: bind it, start it, or stop and delete it.
func (k *Kubelet) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	pod, err := k.pods.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) {
		k.stopName(key)
		return nil
	}
	if err != nil {
		return err
	}
	if uid, ok := k.uidFor(key); ok && uid != pod.UID {
		k.stop(uid) // a new pod took the name of one that is gone
	}
	switch {
	case pod.Spec.NodeName == "":
		return k.bind(ctx, pod)
	case pod.Spec.NodeName != k.cfg.NodeName:
		return nil
	case pod.DeletionTimestamp != nil:
		k.stop(pod.UID)
		return k.remove(ctx, pod)
	case pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed:
		return nil
	}
	if k.isRunning(pod.UID) {
		return nil
	}
	return k.start(ctx, pod)
}

// bind is the scheduler's job: every pod goes to our one Node.
func (k *Kubelet) bind(ctx context.Context, pod *corev1.Pod) error {
	err := k.cfg.Client.CoreV1().Pods(pod.Namespace).Bind(ctx, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID},
		Target:     corev1.ObjectReference{Kind: "Node", Name: k.cfg.NodeName},
	}, metav1.CreateOptions{})
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil // bound already, or gone: the next event says which
	}
	if err != nil {
		return fmt.Errorf("binding: %w", err)
	}
	return nil
}

// remove deletes a pod whose processes are stopped: the kubelet's final delete.
func (k *Kubelet) remove(ctx context.Context, pod *corev1.Pod) error {
	uid := pod.UID
	err := k.cfg.Client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: new(int64),
		Preconditions:      &metav1.Preconditions{UID: &uid},
	})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

func (k *Kubelet) podDir(pod *corev1.Pod) string {
	return filepath.Join(k.cfg.Dir, pod.Namespace+"_"+pod.Name+"_"+string(pod.UID))
}

func (k *Kubelet) uidFor(key string) (types.UID, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	uid, ok := k.byName[key]
	return uid, ok
}

func (k *Kubelet) isRunning(uid types.UID) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.running[uid] != nil
}

func (k *Kubelet) runtimeByName(ns, name string) *podRuntime {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.running[k.byName[ns+"/"+name]]
}

func (k *Kubelet) stopName(key string) {
	if uid, ok := k.uidFor(key); ok {
		k.stop(uid)
	}
}

// stop ends a pod's processes and frees its address.
func (k *Kubelet) stop(uid types.UID) {
	k.mu.Lock()
	rt := k.running[uid]
	delete(k.running, uid)
	if rt != nil && k.byName[rt.key] == uid {
		delete(k.byName, rt.key)
	}
	k.mu.Unlock()
	if rt != nil {
		rt.stop()
		k.cfg.Network.Release(rt.ip)
		k.log.Info("pod stopped", zap.String("pod", rt.key))
	}
}

func (k *Kubelet) stopAll() {
	k.mu.Lock()
	uids := make([]types.UID, 0, len(k.running))
	for uid := range k.running {
		uids = append(uids, uid)
	}
	k.mu.Unlock()
	for _, uid := range uids {
		k.stop(uid)
	}
}
