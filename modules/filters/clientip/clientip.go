// Package clientip is the filter.http.client_ip filter: it resolves a request's client from a
// forwarded-for header for the rest of its route (filters, balancer, upstream), where the
// listener's own detection (ClientTrafficPolicy clientIPDetection, per socket) cannot, because
// the trust belongs to one route. It serves an Ingress's trust-forwarded-for,
// forwarded-for-header and forwarded-for-trusted-cidrs annotations (docs/ingress.md).
//
// Two ways to trust, as the two common proxies do:
//
//   - Hops (no TrustedCIDRs): the client is the entry Hops from the right end of the header, as
//     ClientTrafficPolicy numTrustedHops (core.ForwardedClient); fewer entries: the peer.
//   - TrustedCIDRs: the header counts only when the peer is in one of them; its entries are then
//     read from the right, skipping those in the ranges, and the first one outside is the client
//     (nginx's real_ip_recursive). A header of trusted entries only gives its leftmost entry.
//
// A header that does not give an IP address leaves the client as it was. The filter must come
// first in its chain, so that every per-client filter after it sees the resolved client.
package clientip

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"

	"github.com/coxswain-labs/coxswain/core"
)

// ModuleID is the filter this package registers.
const ModuleID = "filter.http.client_ip"

func init() { core.RegisterModule((*Filter)(nil)) }

var (
	_ core.HTTPMiddleware = (*Filter)(nil)
	_ core.Provisioner    = (*Filter)(nil)
)

// Config is the filter's config.
type Config struct {
	// Header is the header the client is read from; "" is X-Forwarded-For.
	Header string `json:"header,omitempty"`
	// Hops is how many trusted proxies appended to the header (1 or more) when TrustedCIDRs is
	// empty.
	Hops uint32 `json:"hops,omitempty"`
	// TrustedCIDRs are the proxies' address ranges ("10.0.0.0/8", "192.0.2.7").
	TrustedCIDRs []string `json:"trustedCIDRs,omitempty"`
}

// Filter is the module.
type Filter struct {
	Config

	header  string
	trusted []netip.Prefix
}

// CoxswainModule implements core.Module.
func (*Filter) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: ModuleID, New: func() core.Module { return new(Filter) }}
}

// Provision parses the ranges and canonicalizes the header name.
func (f *Filter) Provision(*core.BuildContext) error {
	f.header = http.CanonicalHeaderKey(f.Header)
	if f.header == "" {
		f.header = "X-Forwarded-For"
	}
	for _, c := range f.TrustedCIDRs {
		p, err := ParsePrefix(c)
		if err != nil {
			return err
		}
		f.trusted = append(f.trusted, p)
	}
	if len(f.trusted) == 0 && f.Hops == 0 {
		return fmt.Errorf("neither hops nor trustedCIDRs")
	}
	return nil
}

// ParsePrefix reads a range, or one address as a range of one.
func ParsePrefix(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not an address range (10.0.0.0/8) or address", s)
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// WrapHTTP implements core.HTTPMiddleware.
func (f *Filter) WrapHTTP(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ip, ok := f.client(r); ok {
			r = core.WithClientAddr(w, r, netip.AddrPortFrom(ip, 0)) // the access log's client_ip too
		}
		next.ServeHTTP(w, r)
	})
}

// client is the client the header gives, false when it gives none.
func (f *Filter) client(r *http.Request) (netip.Addr, bool) {
	lines := r.Header[f.header]
	if len(lines) == 0 {
		return netip.Addr{}, false
	}
	if len(f.trusted) == 0 {
		return core.ForwardedClient(lines, f.Hops)
	}
	if !f.trusts(core.PeerAddr(r).Addr()) {
		return netip.Addr{}, false
	}
	var last netip.Addr
	for i := len(lines) - 1; i >= 0; i-- {
		entries := strings.Split(lines[i], ",")
		for j := len(entries) - 1; j >= 0; j-- {
			ip, ok := core.ForwardedClient([]string{entries[j]}, 1)
			if !ok {
				return last, last.IsValid() // an entry that is no address: nothing left of it is believable
			}
			if !f.trusts(ip) {
				return ip, true
			}
			last = ip
		}
	}
	return last, last.IsValid()
}

func (f *Filter) trusts(ip netip.Addr) bool {
	for _, p := range f.trusted {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}
