package proxy

import (
	"context"
	"errors"
	"sort"
	"syscall"
	"time"

	"go.uber.org/zap"
)

// BindReason classifies why a listener socket could not be bound, so that the controller can
// tell a port someone else holds from an address that is not this host's.
type BindReason string

const (
	// BindAddressInUse: another socket holds the address and port (EADDRINUSE).
	BindAddressInUse BindReason = "AddressInUse"
	// BindAddressNotAvailable: the address is not local to this host (EADDRNOTAVAIL).
	BindAddressNotAvailable BindReason = "AddressNotAvailable"
	// BindPermissionDenied: a privileged port without the capability to bind it (EACCES).
	BindPermissionDenied BindReason = "PermissionDenied"
	// BindOther is any other error.
	BindOther BindReason = "Other"
)

// ListenerFailure is a listener of the table serving now that the proxy could not bind. The
// table's other listeners serve meanwhile; this one is retried at every Apply and on a backoff
// timer (Options.BindRetryMin..BindRetryMax), so a port freed later is bound without a new
// snapshot.
type ListenerFailure struct {
	// Name is the IR listener name ("<address>:<port>/<protocol>").
	Name     string `json:"name"`
	Protocol string `json:"protocol"`
	// Address is the "host:port" the proxy tried to bind.
	Address string     `json:"address"`
	Reason  BindReason `json:"reason"`
	Error   string     `json:"error"`
	// Since is the first failed attempt of this run of failures; Attempts counts them.
	Since    time.Time `json:"since"`
	Attempts int       `json:"attempts"`

	next time.Time // when the retry timer tries again
}

func bindReason(err error) BindReason {
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		return BindAddressInUse
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		return BindAddressNotAvailable
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM):
		return BindPermissionDenied
	}
	return BindOther
}

// Default bounds of the bind retry backoff.
const (
	DefaultBindRetryMin = 250 * time.Millisecond
	DefaultBindRetryMax = 5 * time.Second
)

// failure records a failed bind of bl at now, continuing prev (the same listener's earlier
// failure, if any): attempts count up and the next retry backs off, doubling up to the maximum.
func (p *Proxy) failure(bl *builtListener, err error, now time.Time, prev *ListenerFailure) *ListenerFailure {
	f := &ListenerFailure{Name: bl.ir.GetName(), Protocol: bl.ir.GetProtocol(), Address: bl.key.hostPort(),
		Reason: bindReason(err), Error: err.Error(), Since: now, Attempts: 1}
	if prev != nil {
		f.Since, f.Attempts = prev.Since, prev.Attempts+1
	}
	delay := p.retryMin
	for i := 1; i < f.Attempts && delay < p.retryMax; i++ {
		delay *= 2
	}
	f.next = now.Add(min(delay, p.retryMax))
	if prev == nil || prev.Error != f.Error {
		p.log.Warn("listener cannot be bound; the other listeners serve, and this one is retried",
			zap.String("listener", f.Name), zap.String("address", f.Address), zap.String("reason", string(f.Reason)),
			zap.String("error", f.Error))
	} else {
		p.log.Debug("listener still cannot be bound", zap.String("listener", f.Name), zap.Int("attempts", f.Attempts),
			zap.String("error", f.Error))
	}
	return f
}

// retryBinds is the retry timer's callback.
func (p *Proxy) retryBinds() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.retryLocked(time.Now(), false)
}

// retryLocked tries again to bind the current table's failed listeners: those due at now, or all
// of them. A listener that binds starts serving the current table at once. p.mu is held.
func (p *Proxy) retryLocked(now time.Time, all bool) {
	t := p.cur.Load()
	if t == nil || len(p.failed) == 0 {
		return
	}
	changed := false
	for _, bl := range t.listeners {
		f := p.failed[bl.key]
		if f == nil || (!all && now.Before(f.next)) {
			continue
		}
		ln, err := bind(context.Background(), bl.key)
		if err != nil {
			p.failed[bl.key] = p.failure(bl, err, now, f)
			continue
		}
		delete(p.failed, bl.key)
		s := newSocket(bl.key, ln, p.log, p.limits)
		p.sockets[bl.key] = s
		p.attach(s, bl, true)
		p.log.Info("listener bound after failing", zap.String("listener", f.Name), zap.String("address", ln.Addr().String()),
			zap.Int("failedAttempts", f.Attempts), zap.Duration("after", now.Sub(f.Since)))
		changed = true
	}
	p.schedule()
	if changed {
		p.notify()
	}
}

// schedule (re)arms the retry timer for the earliest due failure. p.mu is held.
func (p *Proxy) schedule() {
	if p.retry != nil {
		p.retry.Stop()
		p.retry = nil
	}
	if len(p.failed) == 0 || p.closed {
		return
	}
	var next time.Time
	for _, f := range p.failed {
		if next.IsZero() || f.next.Before(next) {
			next = f.next
		}
	}
	p.retry = time.AfterFunc(max(time.Until(next), 0), p.retryBinds)
}

// notify wakes whoever waits on ListenersChanged. p.mu is held.
func (p *Proxy) notify() {
	close(p.changed)
	p.changed = make(chan struct{})
}

func (p *Proxy) failedList() []ListenerFailure {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]ListenerFailure, 0, len(p.failed))
	for _, f := range p.failed {
		out = append(out, *f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (p *Proxy) listenersChanged() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.changed
}
