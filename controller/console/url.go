package console

import (
	"net"
	"net/netip"
)

// URL is the address to open the console at, given the address its server listens on. An
// unspecified IP (":9901", "0.0.0.0:9901", "[::]:9901") becomes localhost, which reaches it.
func URL(listen net.Addr) string {
	host, port, err := net.SplitHostPort(listen.String())
	if err != nil {
		return "http://" + listen.String() + "/"
	}
	if ip, err := netip.ParseAddr(host); host == "" || (err == nil && ip.IsUnspecified()) {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port) + "/"
}
