//go:build !unix

package udproute

import "net"

// readDatagram reads one datagram into a pooled buffer and hands it to f.
func readDatagram(c *net.UDPConn, f func([]byte) error) error {
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	n, err := c.Read(*bp)
	if err != nil {
		return err
	}
	return f((*bp)[:n])
}
