package ipaccess

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/coxswain-labs/coxswain/core"
)

func newFilter(t testing.TB, c Config) *IpAccessControl {
	t.Helper()
	f := &IpAccessControl{Config: c}
	if err := f.Provision(nil); err != nil {
		t.Fatalf("Provision: %v", err)
	}
	return f
}

func TestAllowed(t *testing.T) {
	tests := []struct {
		name    string
		config  Config
		allowed []string
		refused []string
	}{
		{"no lists", Config{}, []string{"10.0.0.1", "::1"}, nil},
		{"deny only", Config{Deny: []string{"10.0.0.0/8", "2001:db8::1"}},
			[]string{"11.0.0.1", "2001:db8::2", "::1"}, []string{"10.9.9.9", "2001:db8::1", "::ffff:10.1.1.1"}},
		{"allow only", Config{Allow: []string{"192.0.2.0/24", "2001:db8::/32"}},
			[]string{"192.0.2.1", "::ffff:192.0.2.200", "2001:db8:5::9"}, []string{"192.0.3.1", "2001:db9::1", "::1"}},
		{"deny wins over allow", Config{Deny: []string{"192.0.2.7"}, Allow: []string{"192.0.2.0/24"}},
			[]string{"192.0.2.6", "192.0.2.8"}, []string{"192.0.2.7", "198.51.100.1"}},
		{"invalid entries are skipped", Config{Deny: []string{"nope", "10.0.0.1"}, Allow: []string{"10.0.0.0/33", "10.0.0.0/8"}},
			[]string{"10.0.0.2"}, []string{"10.0.0.1", "11.0.0.1"}},
		{"an allow list of invalid entries admits nobody", Config{Allow: []string{"10.0.0.0/33", "bogus"}},
			nil, []string{"10.0.0.1", "::1"}},
		{"mapped entry is IPv4", Config{Allow: []string{"::ffff:127.0.0.2"}}, []string{"127.0.0.2"}, []string{"127.0.0.3"}},
		{"IPv4 does not match IPv6 /0", Config{Deny: []string{"::/0"}}, []string{"127.0.0.1"}, []string{"::1", "fe80::1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFilter(t, tt.config)
			for _, a := range tt.allowed {
				if !f.Allowed(netip.MustParseAddr(a)) {
					t.Errorf("%s refused", a)
				}
			}
			for _, a := range tt.refused {
				if f.Allowed(netip.MustParseAddr(a)) {
					t.Errorf("%s allowed", a)
				}
			}
		})
	}
	// An unknown client passes a deny list and fails an allow list.
	if !newFilter(t, Config{Deny: []string{"0.0.0.0/0"}}).Allowed(netip.Addr{}) ||
		newFilter(t, Config{Allow: []string{"0.0.0.0/0", "::/0"}}).Allowed(netip.Addr{}) {
		t.Error("unknown client: want allowed by a deny list, refused by an allow list")
	}
}

func TestFilterRequest(t *testing.T) {
	f := newFilter(t, Config{Deny: []string{"192.0.2.1"}})
	r := httptest.NewRequest(http.MethodGet, "/x", nil)
	r.RemoteAddr = "192.0.2.2:5000"
	if !f.FilterRequest(httptest.NewRecorder(), r) {
		t.Error("192.0.2.2 refused")
	}
	r.RemoteAddr = "[::ffff:192.0.2.1]:5000"
	w := httptest.NewRecorder()
	if f.FilterRequest(w, r) || w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), DeniedMessage) {
		t.Errorf("mapped 192.0.2.1: %d %q, want 403", w.Code, w.Body)
	}
	r.Header.Set("Content-Type", "application/grpc")
	w = httptest.NewRecorder()
	if f.FilterRequest(w, r) || w.Code != http.StatusOK || w.Header().Get("Grpc-Status") != "7" || w.Body.Len() != 0 {
		t.Errorf("gRPC call: %d %v %q, want a trailers-only PERMISSION_DENIED", w.Code, w.Header(), w.Body)
	}
}

func TestConfigWarnings(t *testing.T) {
	f := &IpAccessControl{Config: Config{Deny: []string{"10.0.0.1", "10.0.0.0/33"}, Allow: []string{"10.1.2.3/16", "bogus"}}}
	got := f.ConfigWarnings()
	want := []string{
		`deny[1] "10.0.0.0/33" is not an address or CIDR and is ignored`,
		`allow[1] "bogus" is not an address or CIDR and is ignored`,
		`allow[0] "10.1.2.3/16" has host bits set and is read as 10.1.0.0/16`,
	}
	if len(got) != len(want) {
		t.Fatalf("warnings %q, want %d", got, len(want))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("warning %d = %q, want it to start with %q", i, got[i], want[i])
		}
	}
	if w := (&IpAccessControl{Config: Config{Allow: []string{"x"}}}).ConfigWarnings(); !slices.Contains(w, "allow has no valid entry: every client is refused") {
		t.Errorf("all-invalid allow list: %q", w)
	}
	if w := (&IpAccessControl{Config: Config{Deny: []string{"10.0.0.0/8", "::1"}}}).ConfigWarnings(); len(w) != 0 {
		t.Errorf("valid lists: %q", w)
	}
	many := make([]string, 25)
	for i := range many {
		many[i] = "bad"
	}
	if w := (&IpAccessControl{Config: Config{Deny: many}}).ConfigWarnings(); len(w) != maxWarnings+1 || w[maxWarnings] != "and 15 more such entries" {
		t.Errorf("25 invalid entries: %d warnings, last %q", len(w), w[len(w)-1])
	}
}

// TestProvisionWarns: the proxy logs what the controller shows on the route.
func TestProvisionWarns(t *testing.T) {
	obs, logs := observer.New(zapcore.WarnLevel)
	bc := corebc(t, zap.New(obs))
	f := &IpAccessControl{Config: Config{Deny: []string{"300.0.0.1"}}}
	if err := f.Provision(bc); err != nil {
		t.Fatal(err)
	}
	if logs.Len() != 1 || !strings.Contains(logs.All()[0].ContextMap()["warning"].(string), `deny[0] "300.0.0.1"`) {
		t.Errorf("logs %+v", logs.All())
	}
}

func corebc(t *testing.T, log *zap.Logger) *core.BuildContext {
	bc := core.NewBuildContext(context.Background(), log, core.NewRegistry((*IpAccessControl)(nil)), nil)
	t.Cleanup(func() { _ = bc.Close() })
	return bc
}

// TestLoad goes through core.Load: the module's JSON fields are the CRD's spec fields, decoded
// strictly; invalid entries do not fail the load.
func TestLoad(t *testing.T) {
	bc := corebc(t, nil)
	mc := core.MustConfig(ModuleID, nil)
	mc.Json = []byte(`{"deny":["10.0.0.1","junk"],"allow":["10.0.0.0/8"]}`)
	if _, err := core.Load[core.HTTPRequestFilter](bc, mc); err != nil {
		t.Errorf("Load: %v", err)
	}
	mc.Json = []byte(`{"denied":["10.0.0.1"]}`)
	if _, err := core.Load[core.HTTPRequestFilter](bc, mc); err == nil || !strings.Contains(err.Error(), "unknown field") {
		t.Errorf("unknown field: error = %v", err)
	}
	if err := API.Check(ModuleID); err != nil {
		t.Error(err)
	}
	exts, errs := core.NewRegistry((*IpAccessControl)(nil)).Extensions()
	if len(errs) != 0 || !reflect.DeepEqual(exts[ModuleID], API) {
		t.Errorf("Extensions() = %v, %v; want %s: %+v", exts, errs, ModuleID, API)
	}
	if _, ok := core.Freeze().Lookup(ModuleID); !ok {
		t.Errorf("%s is not registered", ModuleID)
	}
}

// TestFilterRequestDoesNotAllocate: an allowed request costs no allocation, with 10,000 entries.
func TestFilterRequestDoesNotAllocate(t *testing.T) {
	f := newFilter(t, Config{Allow: cidrs(10000, false), Deny: []string{"192.0.2.0/24"}})
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.RemoteAddr = "10.0.4.77:40000"
	if n := testing.AllocsPerRun(100, func() {
		if !f.FilterRequest(nil, r) {
			t.Fatal("refused")
		}
	}); n != 0 {
		t.Errorf("FilterRequest: %v allocs, want 0", n)
	}
}
