package adminapi

import "testing"

func TestResolveAuth(t *testing.T) {
	for _, c := range []struct{ mode, addr, want string }{
		{AuthAuto, "127.0.0.1:9902", AuthNone},
		{AuthAuto, "127.1.2.3:9902", AuthNone},
		{AuthAuto, "[::1]:9902", AuthNone},
		{AuthAuto, "localhost:9902", AuthNone},
		{AuthAuto, ":9902", AuthKubernetes},
		{AuthAuto, "0.0.0.0:9902", AuthKubernetes},
		{AuthAuto, "10.0.0.5:9902", AuthKubernetes},
		{AuthAuto, "not an address", AuthKubernetes},
		{AuthNone, ":9902", AuthNone},
		{AuthKubernetes, "127.0.0.1:9902", AuthKubernetes},
	} {
		if got := ResolveAuth(c.mode, c.addr); got != c.want {
			t.Errorf("ResolveAuth(%q, %q) = %q, want %q", c.mode, c.addr, got, c.want)
		}
	}
}

// TestHints: the reasons an operator meets first each have a hint.
func TestHints(t *testing.T) {
	for _, r := range []string{"BackendNotFound", "RefNotPermitted", "NoMatchingParent", "NotAllowedByListeners",
		"NoMatchingListenerHostname", "InvalidCertificateRef", "PortUnavailable", "Pending", "FilterNotFound"} {
		if HintFor(r) == "" {
			t.Errorf("no hint for %s", r)
		}
	}
	if HintFor("NoSuchReason") != "" {
		t.Error("a hint for an unknown reason")
	}
}
