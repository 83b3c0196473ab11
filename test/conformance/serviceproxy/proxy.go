package serviceproxy

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Proxy keeps Table in step with the cluster's Services and EndpointSlices.
type Proxy struct {
	Client      kubernetes.Interface
	ServiceCIDR netip.Prefix
	Log         *zap.Logger
	// RulesetFile, when set, receives every ruleset applied (the last one stays), for the logs
	// of a run.
	RulesetFile string
}

// Run watches until ctx ends, then removes Table. It returns once the informers have synced
// and the first ruleset is in place, with a function that waits for the proxy to stop.
func (p *Proxy) Run(ctx context.Context) (wait func(), err error) {
	if _, err := exec.LookPath("nft"); err != nil {
		return nil, fmt.Errorf("the harness's service proxy needs nft (Debian package nftables): %w", err)
	}
	factory := informers.NewSharedInformerFactory(p.Client, 0)
	services := factory.Core().V1().Services()
	slices := factory.Discovery().V1().EndpointSlices()
	dirty := make(chan struct{}, 1)
	mark := func() {
		select {
		case dirty <- struct{}{}:
		default: // a sync is already due; it will read the newest state
		}
	}
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { mark() },
		UpdateFunc: func(any, any) { mark() },
		DeleteFunc: func(any) { mark() },
	}
	for _, inf := range []cache.SharedIndexInformer{services.Informer(), slices.Informer()} {
		if _, err := inf.AddEventHandler(handler); err != nil {
			return nil, err
		}
	}
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return nil, fmt.Errorf("service proxy: %v informer did not sync", typ)
		}
	}
	sync := func() error {
		svcs, err := services.Lister().List(labels.Everything())
		if err != nil {
			return err
		}
		eps, err := slices.Lister().List(labels.Everything())
		if err != nil {
			return err
		}
		return p.apply(Ruleset(Backends(svcs, eps), p.ServiceCIDR))
	}
	if err := sync(); err != nil {
		return nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer factory.Shutdown()
		for {
			select {
			case <-ctx.Done():
				if err := nft(fmt.Sprintf("delete table ip %s\n", Table)); err != nil {
					p.Log.Warn("removing the service proxy's table", zap.Error(err))
				}
				return
			case <-dirty:
			}
			began := time.Now()
			if err := sync(); err != nil {
				// The next change tries again; a ruleset nft refuses is a bug of Ruleset.
				p.Log.Error("service proxy sync failed", zap.Error(err))
				continue
			}
			p.Log.Debug("service proxy synced", zap.Duration("took", time.Since(began)))
		}
	}()
	return func() { <-done }, nil
}

func (p *Proxy) apply(ruleset string) error {
	if p.RulesetFile != "" {
		if err := os.WriteFile(p.RulesetFile, []byte(ruleset), 0o644); err != nil {
			return err
		}
	}
	return nft(ruleset)
}

// nft runs an nft script as one transaction: all of it applies or none.
func nft(script string) error {
	cmd := exec.Command("nft", "-f", "-")
	cmd.Stdin = bytes.NewBufferString(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("nft -f: %v: %s\nscript:\n%s", err, out, script)
	}
	return nil
}
