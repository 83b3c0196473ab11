//go:build unix

package udproute

import (
	"errors"
	"net"
	"syscall"
)

// readDatagram waits until c is readable without holding a buffer, then reads one datagram into a
// pooled buffer and hands it to f.
func readDatagram(c *net.UDPConn, f func([]byte) error) error {
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var rerr error
	err = rc.Read(func(fd uintptr) bool {
		bp := bufPool.Get().(*[]byte)
		defer bufPool.Put(bp)
		n, err := syscall.Read(int(fd), *bp)
		if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EINTR) {
			return false
		}
		if err != nil {
			rerr = err
			return true
		}
		rerr = f((*bp)[:n])
		return true
	})
	if err != nil {
		return err
	}
	return rerr
}
