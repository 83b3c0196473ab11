package proxycmd

import (
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/coxswain-labs/coxswain/core/proxy"
)

// TestHTTP2ServerFlag: --proxy-http2-server defaults to the own server, takes "stdlib" as the
// fallback, and refuses anything else with the allowed values in the error.
func TestHTTP2ServerFlag(t *testing.T) {
	parse := func(args ...string) (*ProxyFlags, error) {
		var p ProxyFlags
		fs := flag.NewFlagSet("proxy", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		p.Register(fs)
		return &p, fs.Parse(args)
	}
	p, err := parse()
	if err != nil || p.Limits().HTTP2Server != proxy.HTTP2Own {
		t.Fatalf("default: %q (%v), want %q", p.Limits().HTTP2Server, err, proxy.HTTP2Own)
	}
	if p, err = parse("--proxy-http2-server=stdlib"); err != nil || p.Limits().HTTP2Server != proxy.HTTP2Stdlib {
		t.Fatalf("stdlib: %q (%v)", p.Limits().HTTP2Server, err)
	}
	if _, err = parse("--proxy-http2-server=nghttp2"); err == nil || !strings.Contains(err.Error(), `"own" or "stdlib"`) {
		t.Fatalf("bad value: %v, want an error naming the allowed values", err)
	}
}
