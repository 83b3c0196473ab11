package proxy

import (
	"net"
	"testing"
)

// remoteIP is net.SplitHostPort's host, whatever the address looks like.
func TestRemoteIPAgreesWithSplitHostPort(t *testing.T) {
	for _, addr := range []string{
		"127.0.0.1:8080", "10.0.0.1:", ":80", "[::1]:443", "[fe80::1%eth0]:1", "::1:80", "1.2.3.4",
		"", ":", "a]b:80", "a[b:80", "1.2.3.4:5]", "[1.2.3.4]:80", "[::1]", "host.example:80", "1.2.3.4:80:90",
	} {
		want, _, err := net.SplitHostPort(addr)
		got, ok := remoteIP(addr)
		if ok != (err == nil) || (ok && got != want) {
			t.Errorf("remoteIP(%q) = %q, %v; SplitHostPort: %q, %v", addr, got, ok, want, err)
		}
	}
}
