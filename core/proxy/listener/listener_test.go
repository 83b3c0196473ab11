package listener

import (
	"strings"
	"testing"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy"
)

func TestCheck(t *testing.T) {
	terminate := &irv1.TLS{Certificates: []string{"ns/cert"}}
	cases := []struct {
		name    string
		sl      proxy.StreamListener
		servers []*irv1.Server
		wantErr string
	}{
		{"http without TLS", &HTTP{}, []*irv1.Server{{Hostname: "a.example.com"}}, ""},
		{"http with TLS settings", &HTTP{}, []*irv1.Server{{Tls: terminate}}, "cleartext"},
		{"https terminating", &HTTPS{}, []*irv1.Server{{Hostname: "*.example.com", Tls: terminate}}, ""},
		{"https without servers", &HTTPS{}, nil, "no servers"},
		{"https server without TLS", &HTTPS{}, []*irv1.Server{{Hostname: "a.example.com"}}, "no TLS"},
		{"https server with routes and no certificate", &HTTPS{}, []*irv1.Server{{Tls: &irv1.TLS{}, VirtualHosts: []*irv1.VirtualHost{{}}}}, "no certificate"},
		{"https server waiting for its ACME certificate", &HTTPS{}, []*irv1.Server{{Tls: &irv1.TLS{}}}, ""},
		{"https passthrough", &HTTPS{}, []*irv1.Server{{Tls: &irv1.TLS{Mode: irv1.TLS_PASSTHROUGH, Certificates: []string{"x"}}}}, "listener.tls"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.sl.Check(&irv1.Listener{Servers: tc.servers})
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("unexpected error %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("error %v, want one mentioning %q", err, tc.wantErr)
			}
		})
	}
}

func TestModuleIDs(t *testing.T) {
	if id := (&HTTP{}).CoxswainModule().ID; id != "listener.http" {
		t.Errorf("HTTP module ID %s", id)
	}
	if id := (&HTTPS{}).CoxswainModule().ID; id != "listener.https" {
		t.Errorf("HTTPS module ID %s", id)
	}
}
