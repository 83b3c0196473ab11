package listener

import (
	"strings"
	"testing"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy"
)

func TestL4Check(t *testing.T) {
	pass := &irv1.TLS{Mode: irv1.TLS_PASSTHROUGH}
	term := &irv1.TLS{Certificates: []string{"ns/cert"}}
	cases := []struct {
		name    string
		sl      proxy.StreamListener
		servers []*irv1.Server
		wantErr string
	}{
		{"tcp catch-all", &TCP{}, []*irv1.Server{{}}, ""},
		{"tcp with a hostname", &TCP{}, []*irv1.Server{{Hostname: "a.example.com"}}, "no hostname"},
		{"tcp with two servers", &TCP{}, []*irv1.Server{{}, {Hostname: "a"}}, "exactly one"},
		{"tcp with TLS", &TCP{}, []*irv1.Server{{Tls: pass}}, "no TLS"},
		{"udp catch-all", &UDP{}, []*irv1.Server{{}}, ""},
		{"udp without servers", &UDP{}, nil, "exactly one"},
		{"tls mixed", &TLS{}, []*irv1.Server{{Hostname: "a.example.com", Tls: pass}, {Hostname: "b.example.com", Tls: term}}, ""},
		{"tls without servers", &TLS{}, nil, "no servers"},
		{"tls server without TLS", &TLS{}, []*irv1.Server{{Hostname: "a"}}, "no TLS"},
		{"tls terminate without certificate", &TLS{}, []*irv1.Server{{Tls: &irv1.TLS{}}}, "without a certificate"},
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

func TestL4RouteAPIs(t *testing.T) {
	for _, tc := range []struct {
		sl   proxy.StreamListener
		want proxy.RouteAPI
	}{{&TCP{}, proxy.RouteAPIStream}, {&TLS{}, proxy.RouteAPIStream}, {&UDP{}, proxy.RouteAPIDatagram}} {
		if got := tc.sl.(proxy.RouteAPIer).RouteAPI(); got != tc.want {
			t.Errorf("%s: route API %v, want %v", tc.sl.CoxswainModule().ID, got, tc.want)
		}
	}
	if _, ok := proxy.StreamListener(&UDP{}).(proxy.PacketListener); !ok {
		t.Error("listener.udp is not a PacketListener")
	}
	if _, ok := proxy.StreamListener(&TCP{}).(proxy.PacketListener); ok {
		t.Error("listener.tcp is a PacketListener")
	}
}
