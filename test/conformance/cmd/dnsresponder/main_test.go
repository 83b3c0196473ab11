package main

import (
	"net"
	"strings"
	"testing"

	"github.com/miekg/dns"
)

// The conformance suite's Corefile (base/manifests.yaml, ConfigMap coredns).
const suiteCorefile = `.:53 {
    forward . 8.8.8.8 9.9.9.9
    log
    errors
}
foo.bar.com:53 {
  whoami
}
`

func TestParseCorefile(t *testing.T) {
	blocks, err := parseCorefile(strings.NewReader(suiteCorefile))
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 2 {
		t.Fatalf("got %d blocks", len(blocks))
	}
	if b := match(blocks, "foo.bar.com."); b == nil || !b.plugins["whoami"] || b.port != "53" {
		t.Errorf("foo.bar.com. matched %+v", b)
	}
	if b := match(blocks, "example.com."); b == nil || !b.plugins["forward"] {
		t.Errorf("example.com. matched %+v", b)
	}
	for _, bad := range []string{"plugin\n", ". {\n", "}\n. {\nx\n"} {
		if _, err := parseCorefile(strings.NewReader(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestServe answers real queries on loopback: whoami for foo.bar.com, SERVFAIL for the forward
// zone (nothing is reachable), as the suite's UDPRoute test expects some answer.
func TestServe(t *testing.T) {
	blocks, err := parseCorefile(strings.NewReader(suiteCorefile))
	if err != nil {
		t.Fatal(err)
	}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	srv := &dns.Server{PacketConn: pc, Handler: handler(blocks), NotifyStartedFunc: func() { close(started) }}
	go func() { _ = srv.ActivateAndServe() }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	<-started
	c := &dns.Client{}
	for _, tc := range []struct {
		name  string
		rcode int
		extra int
	}{{"foo.bar.com.", dns.RcodeSuccess, 2}, {"example.com.", dns.RcodeServerFailure, 0}} {
		m := new(dns.Msg)
		m.SetQuestion(tc.name, dns.TypeA)
		r, _, err := c.Exchange(m, pc.LocalAddr().String())
		if err != nil {
			t.Fatal(err)
		}
		if r.Rcode != tc.rcode || len(r.Extra) != tc.extra {
			t.Errorf("%s: rcode %s, %d extra records", tc.name, dns.RcodeToString[r.Rcode], len(r.Extra))
		}
	}
}
