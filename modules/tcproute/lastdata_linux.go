//go:build linux

package tcproute

import (
	"net"
	"time"

	"golang.org/x/sys/unix"

	"github.com/coxswain-labs/coxswain/core"
)

// sinceLastData is how long ago the most recent data segment was sent or received on any of conns
// that is a TCP socket, as the kernel counts it (TCP_INFO, millisecond resolution); ok is false
// when none of them can be asked.
func sinceLastData(conns ...net.Conn) (since time.Duration, ok bool) {
	for _, c := range conns {
		tc, isTCP := core.TCPConnOf(c)
		if !isTCP {
			continue // a TLS-terminated side: its socket is behind the TLS connection
		}
		rc, err := tc.SyscallConn()
		if err != nil {
			continue
		}
		var info *unix.TCPInfo
		var gerr error
		if err := rc.Control(func(fd uintptr) {
			info, gerr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
		}); err != nil || gerr != nil {
			continue
		}
		d := time.Duration(min(info.Last_data_recv, info.Last_data_sent)) * time.Millisecond
		if !ok || d < since {
			since, ok = d, true
		}
	}
	return since, ok
}
