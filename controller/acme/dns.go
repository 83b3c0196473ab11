package acme

import (
	"context"
	"fmt"

	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"

	"github.com/coxswain-labs/coxswain/core"
)

// DNSProvider is what a module in the namespace acme.dns.* implements: a libdns provider that can
// add and remove the TXT records of DNS-01 (certmagic.DNSProvider). Its credentials are its own
// business (environment, a file): they never pass through a Gateway. A module that needs setting
// up implements core.Provisioner, called with the Manager's context.
type DNSProvider interface {
	core.Module
	certmagic.DNSProvider
}

func loadDNSProvider(ctx context.Context, reg *core.Registry, id core.ModuleID, log *zap.Logger) (DNSProvider, error) {
	info, ok := reg.Lookup(id)
	if !ok {
		return nil, fmt.Errorf("no DNS provider module %s is compiled in", id)
	}
	p, ok := info.New().(DNSProvider)
	if !ok {
		return nil, fmt.Errorf("module %s is not a DNS provider (acme.DNSProvider)", id)
	}
	if pr, ok := p.(core.Provisioner); ok {
		bc := core.NewBuildContext(ctx, log.Named(string(id)), reg, nil)
		if err := pr.Provision(bc); err != nil {
			return nil, fmt.Errorf("module %s: %w", id, err)
		}
	}
	return p, nil
}
