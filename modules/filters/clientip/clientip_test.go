package clientip_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/coxswain-labs/coxswain/core"
	"github.com/coxswain-labs/coxswain/modules/filters/clientip"
)

func TestClient(t *testing.T) {
	cases := []struct {
		name   string
		cfg    clientip.Config
		peer   string
		header map[string][]string
		want   string
	}{
		{"one hop", clientip.Config{Hops: 1}, "10.0.0.1:5", map[string][]string{"X-Forwarded-For": {"1.1.1.1, 2.2.2.2"}}, "2.2.2.2"},
		{"two hops over two lines", clientip.Config{Hops: 2}, "10.0.0.1:5", map[string][]string{"X-Forwarded-For": {"1.1.1.1", "2.2.2.2, 3.3.3.3"}}, "2.2.2.2"},
		{"fewer entries than hops", clientip.Config{Hops: 3}, "10.0.0.1:5", map[string][]string{"X-Forwarded-For": {"1.1.1.1"}}, "10.0.0.1"},
		{"no header", clientip.Config{Hops: 1}, "10.0.0.1:5", nil, "10.0.0.1"},
		{"other header", clientip.Config{Header: "x-real-ip", Hops: 1}, "10.0.0.1:5", map[string][]string{"X-Real-Ip": {"4.4.4.4"}, "X-Forwarded-For": {"1.1.1.1"}}, "4.4.4.4"},
		{"cidrs: skip trusted entries", clientip.Config{TrustedCIDRs: []string{"10.0.0.0/8"}}, "10.0.0.1:5",
			map[string][]string{"X-Forwarded-For": {"6.6.6.6, 5.5.5.5, 10.1.1.1, 10.2.2.2"}}, "5.5.5.5"},
		{"cidrs: untrusted peer", clientip.Config{TrustedCIDRs: []string{"10.0.0.0/8"}}, "192.0.2.1:5",
			map[string][]string{"X-Forwarded-For": {"5.5.5.5"}}, "192.0.2.1"},
		{"cidrs: all trusted", clientip.Config{TrustedCIDRs: []string{"10.0.0.0/8"}}, "10.0.0.1:5",
			map[string][]string{"X-Forwarded-For": {"10.3.3.3, 10.2.2.2"}}, "10.3.3.3"},
		{"cidrs: garbage entry", clientip.Config{TrustedCIDRs: []string{"10.0.0.0/8", "192.0.2.7"}}, "192.0.2.7:5",
			map[string][]string{"X-Forwarded-For": {"5.5.5.5, nonsense"}}, "192.0.2.7"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := &clientip.Filter{Config: c.cfg}
			if err := f.Provision(nil); err != nil {
				t.Fatal(err)
			}
			var got string
			h := f.WrapHTTP(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { got = core.ClientIP(r).String() }))
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = c.peer
			for k, v := range c.header {
				r.Header[k] = v
			}
			h.ServeHTTP(httptest.NewRecorder(), r)
			if got != c.want {
				t.Errorf("client %s, want %s", got, c.want)
			}
		})
	}
}

func TestProvisionRefuses(t *testing.T) {
	for _, cfg := range []clientip.Config{{}, {TrustedCIDRs: []string{"ten"}}} {
		f := &clientip.Filter{Config: cfg}
		if err := f.Provision(nil); err == nil {
			t.Errorf("%+v: no error", cfg)
		}
	}
}
