//go:build !linux

package proxy

import "net"

// acceptBacklog is a no-op off Linux: closing the listener may reset the connections left in
// its accept queue (see backlog_linux.go).
func acceptBacklog(net.Listener) []net.Conn { return nil }
