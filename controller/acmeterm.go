package controller

import (
	"context"
	"errors"
	"time"

	"github.com/coxswain-labs/coxswain/controller/acme"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// startACME starts the ACME client of a leadership term; nil when ACME is off. Only the leader
// talks to the CA: a standby's translations read no certificates, and a new leader finds the
// old one's in the shared storage (and waits on its locks) instead of ordering them again.
func (c *Controller) startACME(pub Publisher) *acme.Manager {
	if c.opts.ACME == nil {
		return nil
	}
	o := *c.opts.ACME
	if o.Log == nil {
		o.Log = c.log.Named("acme")
	}
	if o.Registry == nil {
		o.Registry = c.opts.Registry
	}
	o.OnChange = func() { c.changed(changeConfig) }
	o.Served = func(ctx context.Context, ch *irv1.ACMEChallenge) error { return servedBy(ctx, pub, ch) }
	return acme.New(o)
}

// servedBy waits until every proxy the publisher feeds has applied a snapshot carrying ch.
func servedBy(ctx context.Context, pub Publisher, ch *irv1.ACMEChallenge) error {
	sp, ok := pub.(ServingPublisher)
	if !ok {
		return errors.New("the publisher cannot tell what the proxies serve")
	}
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for !sp.Serving(func(s *irv1.Snapshot) bool { return acme.Carries(s, ch) }) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}
