package controller

import (
	"context"
	"fmt"
	"sync/atomic"

	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// campaign runs for leadership until ctx is done, leading whenever it wins. A term that ends with
// a lost Lease campaigns again. On shutdown the term is wound down (publisher closed, writers
// stopped) before the Lease is released, so a successor never overlaps with it.
func (c *Controller) campaign(ctx context.Context) error {
	le := c.opts.LeaderElection
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  leaseMeta(le.Namespace, le.Name),
		Client:     c.opts.Kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: le.Identity},
	}
	log := c.log.With(zap.String("lease", le.Namespace+"/"+le.Name), zap.String("identity", le.Identity))
	for ctx.Err() == nil {
		// The elector gets its own context so it releases the Lease only after the term ended.
		electCtx, stopElect := context.WithCancel(context.WithoutCancel(ctx))
		termDone := make(chan struct{})
		var started atomic.Bool
		elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:            lock,
			LeaseDuration:   le.LeaseDuration,
			RenewDeadline:   le.RenewDeadline,
			RetryPeriod:     le.RetryPeriod,
			ReleaseOnCancel: true,
			Name:            le.Name,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(lctx context.Context) {
					started.Store(true)
					defer close(termDone)
					tctx, cancel := context.WithCancel(lctx)
					defer cancel()
					defer context.AfterFunc(ctx, cancel)()
					c.lead(tctx)
				},
				OnStoppedLeading: func() {},
				OnNewLeader: func(id string) {
					c.leader.Store(&id)
					log.Info("leader observed", zap.String("leader", id))
				},
			},
		})
		if err != nil {
			stopElect()
			return fmt.Errorf("leader election: %w", err)
		}
		runDone := make(chan struct{})
		go func() {
			defer close(runDone)
			elector.Run(electCtx)
		}()
		select {
		case <-ctx.Done():
		case <-runDone: // the Lease was lost
			log.Warn("lost the lease")
		}
		if started.Load() {
			<-termDone
		}
		stopElect()
		<-runDone
	}
	return nil
}

func leaseMeta(namespace, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: namespace, Name: name}
}
