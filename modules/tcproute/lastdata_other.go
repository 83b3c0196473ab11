//go:build !linux

package tcproute

import (
	"net"
	"time"
)

// sinceLastData cannot ask the kernel outside Linux: the copy loops' reports decide alone.
func sinceLastData(...net.Conn) (time.Duration, bool) { return 0, false }
