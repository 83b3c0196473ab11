package proxy

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

func (p *Proxy) apply(ctx context.Context, snap *irv1.Snapshot) error {
	if snap == nil {
		return errors.New("nil snapshot")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	// An unsealed snapshot (no version) is always applied: nothing says it is the same.
	cur := p.cur.Load()
	if cur != nil && snap.GetVersion() != "" && cur.ver() == snap.GetVersion() {
		p.retryLocked(time.Now(), true) // the same snapshot again: a good moment to retry failed binds
		return nil
	}
	start := time.Now()
	d := p.sums.digest(snap)
	hashed := time.Since(start) // the shape and the parts' sums (shape.go)
	sh := d.shape
	if cur != nil && cur.shape == sh && p.fastApply(cur, snap) {
		p.log.Info("snapshot applied", zap.String("version", cur.ver()), zap.Bool("endpointsOnly", true),
			zap.Int("listeners", len(cur.listeners)), zap.Int("unbound", len(p.failed)), zap.Duration("took", time.Since(start)))
		return nil
	}
	t, err := p.build(ctx, snap, d)
	if err != nil {
		p.sums.rollback() // the next snapshot is compared with the one serving
		return fmt.Errorf("snapshot %s rejected: %w", snap.GetVersion(), err)
	}
	t.shape = sh
	fresh, failed := p.bindNew(ctx, t, start)
	p.commit(t, fresh, failed)
	p.log.Info("snapshot applied", zap.String("version", t.ver()),
		zap.Int("listeners", len(t.listeners)), zap.Int("unbound", len(failed)), zap.Duration("took", time.Since(start)),
		zap.Duration("hashed", hashed))
	return nil
}

// fastApply applies snap to t, the table serving now, when snap differs from t's snapshot only in
// its clusters' endpoints (the caller compared their shapes): each changed cluster gets a new
// endpoint set, and its session persistence and its balancer the new endpoints, each published
// atomically, so requests keep flowing on the same table and no module is loaded or cleaned up.
// It reports false, having changed nothing, when a changed cluster's balancer cannot take
// endpoints while serving: the caller then rebuilds. p.mu is held.
func (p *Proxy) fastApply(t *table, snap *irv1.Snapshot) bool {
	in := snap.GetClusters()
	if len(in) != len(t.clusters) {
		return false
	}
	next := make([][]*core.Endpoint, len(in))
	for i, c := range in {
		cl := t.clusters[i]
		if cl.name != c.GetName() {
			return false
		}
		eps, changed := endpointsOf(c, cl.set.Load().eps)
		if !changed {
			continue
		}
		if !cl.live {
			return false
		}
		next[i] = eps
	}
	for i, cl := range t.clusters {
		if next[i] != nil {
			// The breakers and the set first: a balancer's pick of a new endpoint then finds its
			// breaker and its pool. A pick from the old endpoints that meets the new set takes the
			// forwarder's slow path to the same endpoint (and no breaker, if it left).
			for _, s := range t.breakers[cl] {
				s.retain(next[i])
			}
			cl.set.Store(p.fwd.newEpSet(cl, next[i]))
			if cl.sticky != nil {
				cl.sticky.setEndpoints(next[i])
			}
			cl.balancer.SetEndpoints(next[i])
		}
		p.fwd.keep(cl)
	}
	v := snap.GetVersion()
	t.version.Store(&v)
	p.fwd.sweep()
	p.retryLocked(time.Now(), true)
	p.notify()
	return true
}

// bindNew binds the sockets t needs that the pool lacks. A socket that cannot be bound does not
// hold the snapshot back: it is returned as a failure, the other listeners serve, and it is
// retried (at the next Apply and on the retry timer). Binding happens before the swap, so no
// socket changes hands half-way.
func (p *Proxy) bindNew(ctx context.Context, t *table, now time.Time) (map[sockKey]*socket, map[sockKey]*ListenerFailure) {
	fresh := map[sockKey]*socket{}
	failed := map[sockKey]*ListenerFailure{}
	for _, bl := range t.listeners {
		if _, ok := p.sockets[bl.key]; ok {
			continue
		}
		ln, err := bind(ctx, bl.key)
		if err != nil {
			failed[bl.key] = p.failure(bl, err, now, p.failed[bl.key])
			continue
		}
		fresh[bl.key] = newSocket(bl.key, ln, p.log, p.limits)
	}
	return fresh, failed
}

// commit points every socket at t, starts or switches servers, closes the sockets t no longer
// names, swaps t in and retires the previous table. failed are t's listeners that have no socket.
func (p *Proxy) commit(t *table, fresh map[sockKey]*socket, failed map[sockKey]*ListenerFailure) {
	inUse := make(map[sockKey]bool, len(t.listeners))
	for _, bl := range t.listeners {
		s, isNew := fresh[bl.key]
		if !isNew {
			s = p.sockets[bl.key]
		}
		if s == nil {
			continue // failed to bind: retried later
		}
		inUse[bl.key] = true
		p.sockets[bl.key] = s
		p.attach(s, bl, isNew)
	}
	for key, s := range p.sockets {
		if inUse[key] {
			continue
		}
		delete(p.sockets, key)
		s.stop()
		if sv := s.cur.Swap(nil); sv != nil {
			p.drain(sv)
		}
	}
	for key, f := range p.failed {
		if failed[key] == nil && inUse[key] {
			p.log.Info("listener bound after failing", zap.String("listener", f.Name), zap.String("address", f.Address),
				zap.Int("failedAttempts", f.Attempts))
		}
	}
	p.failed = failed
	p.applyEndpointUpdates(t)
	retainBreakers(t)
	old := p.cur.Swap(t)
	p.certs.retain(t.certKeys)
	p.upTLS.retain(t.tlsKeys)
	if old == nil || old.clusterSet != t.clusterSet {
		p.fwd.sweep() // else no cluster changed, and none asked for its pools to be kept
	}
	if old != nil {
		p.retired[old] = struct{}{}
		old.retire()
	}
	for r := range p.retired {
		if r.closed.Load() {
			delete(p.retired, r)
		}
	}
	p.schedule()
	p.notify()
}

// attach makes s serve bl: its state, and a server of bl's protocol when s has none or another
// (the previous one drains). A new socket starts accepting. p.mu is held.
func (p *Proxy) attach(s *socket, bl *builtListener, isNew bool) {
	s.state.Store(bl.state)
	if s.cur.Load() == nil || s.module != bl.module {
		if old := s.serve(bl); old != nil {
			p.log.Info("listener protocol changed", zap.String("listener", bl.ir.GetName()),
				zap.String("from", string(old.module)), zap.String("to", string(bl.module)))
			p.drain(old)
		}
	}
	s.name = bl.ir.GetName()
	if isNew {
		go s.acceptLoop()
	}
}

// drain shuts a server down gracefully in the background, closing its connections after
// DrainTimeout. Close waits for drains.
func (p *Proxy) drain(sv *serving) {
	_ = sv.conns.Close()
	p.draining[sv] = struct{}{}
	p.drains.Add(1)
	go func() {
		defer p.drains.Done()
		ctx, cancel := context.WithTimeout(context.Background(), Positive(p.limits.DrainTimeout))
		defer cancel()
		shutdown(ctx, sv)
		p.mu.Lock()
		delete(p.draining, sv)
		p.mu.Unlock()
	}()
}

// shutdown stops sv gracefully until ctx is done, then forcibly.
func shutdown(ctx context.Context, sv *serving) {
	if err := sv.srv.Shutdown(ctx); err != nil {
		_ = sv.srv.Close()
	}
	<-sv.done
}

func (p *Proxy) bound() []BoundListener {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]BoundListener, 0, len(p.sockets))
	for _, s := range p.sockets {
		b := BoundListener{Name: s.name, Address: s.ln.Addr().String()}
		if ls := s.state.Load(); ls != nil {
			b.Protocol = ls.Protocol
		}
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (p *Proxy) close(ctx context.Context) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.schedule() // stops the retry timer
	p.failed = map[sockKey]*ListenerFailure{}
	var servings []*serving
	for key, s := range p.sockets {
		delete(p.sockets, key)
		s.stop()
		<-s.acceptDone
		if sv := s.cur.Swap(nil); sv != nil {
			_ = sv.conns.Close()
			servings = append(servings, sv)
		}
	}
	for sv := range p.draining {
		servings = append(servings, sv)
	}
	p.mu.Unlock()

	var wg sync.WaitGroup
	for _, sv := range servings {
		wg.Add(1)
		go func() {
			defer wg.Done()
			shutdown(ctx, sv)
		}()
	}
	wg.Wait()
	p.drains.Wait()

	p.mu.Lock()
	defer p.mu.Unlock()
	if cur := p.cur.Swap(nil); cur != nil {
		p.retired[cur] = struct{}{}
		cur.retire()
	}
	// Requests still running after ctx expired had their connections closed; clean up regardless.
	for t := range p.retired {
		t.close()
		delete(p.retired, t)
	}
	p.fwd.closeIdle()
	return ctx.Err()
}
