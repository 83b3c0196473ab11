package kubelet

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sync"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// errWaiting marks a pod that cannot start yet (a Secret or ConfigMap it mounts is missing): it
// is retried with backoff, and its status says why it waits.
var errWaiting = errors.New("waiting")

// restartDelay bounds the backoff before a container that exited is started again
// (restartPolicy Always, which is all Deployments use).
const (
	restartDelay    = 500 * time.Millisecond
	maxRestartDelay = 10 * time.Second
)

// podRuntime is one running pod: its sandbox and its containers.
type podRuntime struct {
	k       *Kubelet
	key     string // namespace/name
	uid     types.UID
	ip      netip.Addr
	sandbox *sandbox
	started time.Time

	ctx    context.Context // done when the pod is stopped
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu         sync.Mutex
	containers []*container
}

// start prepares and starts a pod; a missing volume source leaves it waiting for a retry.
func (k *Kubelet) start(ctx context.Context, pod *corev1.Pod) error {
	dir := k.podDir(pod)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	mounts, err := k.materializeVolumes(ctx, pod, dir)
	if err != nil {
		k.setWaiting(ctx, pod, "ContainerCreating", err.Error())
		return err
	}
	ip, err := k.cfg.Network.Allocate()
	if err != nil {
		return err
	}
	specs := make([]*containerSpec, 0, len(pod.Spec.Containers))
	for i := range pod.Spec.Containers {
		s, err := k.containerSpec(ctx, pod, &pod.Spec.Containers[i], ip, mounts, dir)
		if err != nil {
			k.cfg.Network.Release(ip)
			k.setWaiting(ctx, pod, "CreateContainerConfigError", err.Error())
			return err
		}
		specs = append(specs, s)
	}
	sb, err := k.cfg.Network.newSandbox(ctx, ip)
	if err != nil {
		k.cfg.Network.Release(ip)
		return fmt.Errorf("sandbox: %w", err)
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	rt := &podRuntime{
		k: k, key: pod.Namespace + "/" + pod.Name, uid: pod.UID, ip: ip, sandbox: sb, started: time.Now(),
		ctx: rctx, cancel: cancel,
	}
	for _, s := range specs {
		rt.containers = append(rt.containers, &container{spec: s, logs: newLogBuffer()})
	}
	k.mu.Lock()
	k.running[pod.UID] = rt
	k.byName[rt.key] = pod.UID
	k.mu.Unlock()
	k.log.Info("pod starting", zap.String("pod", rt.key), zap.Stringer("ip", ip))
	for _, c := range rt.containers {
		rt.wg.Go(func() { rt.supervise(c) })
	}
	return nil
}

// supervise runs one container until the pod stops: start, wait for its ports, report Ready,
// and start it again with backoff whenever it exits.
func (rt *podRuntime) supervise(c *container) {
	delay := restartDelay
	for {
		err := c.run(rt, func() { rt.k.writeStatus(rt) })
		if rt.ctx.Err() != nil {
			return
		}
		rt.k.log.Warn("container exited", zap.String("pod", rt.key), zap.String("container", c.spec.name), zap.Error(err))
		rt.k.writeStatus(rt)
		select {
		case <-rt.ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(2*delay, maxRestartDelay)
	}
}

// stop kills every process of the pod, the sandbox last (which removes its network namespace and
// with it the veth pair).
func (rt *podRuntime) stop() {
	rt.cancel()
	rt.mu.Lock()
	for _, c := range rt.containers {
		c.kill()
	}
	rt.mu.Unlock()
	rt.wg.Wait()
	rt.sandbox.close()
}

// snapshot returns the containers' states for a status write.
func (rt *podRuntime) snapshot() []containerState {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	out := make([]containerState, 0, len(rt.containers))
	for _, c := range rt.containers {
		out = append(out, c.state())
	}
	return out
}

func (rt *podRuntime) container(name string) *container {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	for _, c := range rt.containers {
		if c.spec.name == name {
			return c
		}
	}
	return nil
}
