// Package ipaccess is the IpAccessControl filter, "filter.ext.gateway.coxswain-labs.dev.IpAccessControl":
// it refuses requests by the client's address before they go upstream. An HTTPRoute or GRPCRoute
// rule references an IpAccessControl object with an ExtensionRef filter; the object's spec is this
// module's Config.
//
// The client is core.ClientIP: the downstream connection's peer as the data plane resolved it
// (the PROXY protocol's source where a listener speaks it), never a header a client can forge.
// The deny list is checked first, then the allow list. Both are compiled once per snapshot into
// sorted, merged address ranges (Set), so a request costs one binary search per list and no
// allocation, with 10 entries or 10,000.
package ipaccess

import (
	"fmt"
	"net/http"
	"net/netip"

	"go.uber.org/zap"

	"github.com/coxswain-labs/coxswain/core"
)

func init() {
	core.RegisterModule((*IpAccessControl)(nil))
}

var (
	_ core.ExtensionKind     = (*IpAccessControl)(nil)
	_ core.HTTPRequestFilter = (*IpAccessControl)(nil)
	_ core.Provisioner       = (*IpAccessControl)(nil)
	_ core.ConfigWarner      = (*IpAccessControl)(nil)
)

// API is the resource behind this module's ExtensionRefs. A reference to an IpAccessControl that
// does not exist fails open, as Coxswain's filter kinds do: the rule is served unfiltered and the
// route says why (ResolvedRefs=False, FilterNotFound). It applies to HTTPRoute and GRPCRoute.
var API = core.ExtensionAPI{
	Group:    "gateway.coxswain-labs.dev",
	Kind:     "IpAccessControl",
	Version:  "v1alpha1",
	Resource: "ipaccesscontrols",
	FailOpen: true,
}

// DeniedMessage is the body (or grpc-message) of a refused request.
const DeniedMessage = "access denied"

// maxWarnings bounds the entries named in warnings; the rest are counted.
const maxWarnings = 10

// IpAccessControl is the module (named as the API kind is spelled).
type IpAccessControl struct {
	Config

	deny, allow *Set
	// allowList: the spec lists allow entries, valid or not; then a client must be in allow.
	allowList bool
}

// CoxswainModule implements core.Module.
func (*IpAccessControl) CoxswainModule() core.ModuleInfo {
	return core.ModuleInfo{ID: ModuleID, New: func() core.Module { return new(IpAccessControl) }}
}

// ExtensionAPI implements core.ExtensionKind.
func (*IpAccessControl) ExtensionAPI() core.ExtensionAPI { return API }

// ExtensionRouteKinds implements core.ExtensionRouteKinds.
func (*IpAccessControl) ExtensionRouteKinds() (supported, ignored []string) {
	return []string{"HTTPRoute", "Ingress", "GRPCRoute"}, nil
}

// Provision compiles both lists, once per snapshot, and logs a WARN for what it skips.
func (f *IpAccessControl) Provision(bc *core.BuildContext) error {
	deny, _, _ := ParseList(f.Deny)
	allow, _, _ := ParseList(f.Allow)
	f.deny, f.allow = NewSet(deny), NewSet(allow)
	f.allowList = len(f.Allow) > 0
	if bc != nil && bc.Log != nil {
		for _, w := range f.ConfigWarnings() {
			bc.Log.Warn("IpAccessControl entry accepted with a warning", zap.String("warning", w))
		}
	}
	return nil
}

// ConfigWarnings implements core.ConfigWarner: every entry that is skipped (it does not parse)
// or read differently from how it is written (host bits set), at most maxWarnings of them named.
func (f *IpAccessControl) ConfigWarnings() []string {
	var out []string
	more := 0
	add := func(format string, args ...any) {
		if len(out) < maxWarnings {
			out = append(out, fmt.Sprintf(format, args...))
		} else {
			more++
		}
	}
	for _, l := range []struct {
		field string
		list  []string
	}{{"deny", f.Deny}, {"allow", f.Allow}} {
		ps, bad, masked := ParseList(l.list)
		for _, b := range bad {
			add("%s[%d] %q is not an address or CIDR and is ignored: %v", l.field, b.Index, b.Entry, b.Err)
		}
		if l.field == "allow" && len(l.list) > 0 && len(ps) == 0 {
			add("allow has no valid entry: every client is refused")
		}
		for _, i := range masked {
			p, _, _ := ParseEntry(l.list[i])
			add("%s[%d] %q has host bits set and is read as %s", l.field, i, l.list[i], p)
		}
	}
	if more > 0 {
		out = append(out, fmt.Sprintf("and %d more such entries", more))
	}
	return out
}

// Allowed reports whether the filter lets a client with address a through: not in deny, and in
// allow when there is an allow list. An unknown client (invalid a) passes only when there is no
// allow list.
func (f *IpAccessControl) Allowed(a netip.Addr) bool {
	if f.deny.Contains(a) {
		return false
	}
	return !f.allowList || f.allow.Contains(a)
}

// FilterRequest refuses a client the lists keep out: 403, or PERMISSION_DENIED to a gRPC call.
func (f *IpAccessControl) FilterRequest(w http.ResponseWriter, r *http.Request) bool {
	if f.Allowed(core.ClientIP(r)) {
		return true
	}
	core.Deny(w, r, http.StatusForbidden, core.GRPCPermissionDenied, DeniedMessage)
	return false
}
