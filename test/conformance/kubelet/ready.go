package kubelet

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Port is a port a workload listens on.
type Port struct {
	Number   uint16
	Protocol corev1.Protocol // TCP or UDP
}

func (p Port) String() string { return fmt.Sprintf("%d/%s", p.Number, p.Protocol) }

// Socket states in /proc/net/{tcp,udp}: a TCP socket in LISTEN; an unconnected UDP socket.
const (
	tcpListen = "0A"
	udpClose  = "07"
)

// listening reports whether every port is bound in the network namespace of process pid, read
// from the kernel's socket tables: no connection is made, so nothing shows up in a workload's
// logs or counters.
func listening(pid int, ports []Port) (bool, error) {
	if len(ports) == 0 {
		return true, nil
	}
	bound := map[Port]bool{}
	for _, t := range []struct {
		file  string
		proto corev1.Protocol
		state string
	}{
		{"tcp", corev1.ProtocolTCP, tcpListen}, {"tcp6", corev1.ProtocolTCP, tcpListen},
		{"udp", corev1.ProtocolUDP, udpClose}, {"udp6", corev1.ProtocolUDP, udpClose},
	} {
		f, err := os.Open(fmt.Sprintf("/proc/%d/net/%s", pid, t.file))
		if err != nil {
			if os.IsNotExist(err) && strings.HasSuffix(t.file, "6") {
				continue // no IPv6 in this kernel
			}
			return false, err
		}
		nums, err := boundPorts(f, t.state)
		f.Close()
		if err != nil {
			return false, fmt.Errorf("/proc/%d/net/%s: %w", pid, t.file, err)
		}
		for _, n := range nums {
			bound[Port{Number: n, Protocol: t.proto}] = true
		}
	}
	for _, p := range ports {
		if !bound[p] {
			return false, nil
		}
	}
	return true, nil
}

// boundPorts parses a /proc/net/{tcp,udp}[6] table and returns the local ports of the sockets
// in state.
func boundPorts(r io.Reader, state string) ([]uint16, error) {
	var out []uint16
	sc := bufio.NewScanner(r)
	first := true
	for sc.Scan() {
		if first { // the header
			first = false
			continue
		}
		f := strings.Fields(sc.Text())
		if len(f) < 4 || f[3] != state {
			continue
		}
		_, port, ok := strings.Cut(f[1], ":")
		if !ok {
			return nil, fmt.Errorf("local address %q", f[1])
		}
		n, err := strconv.ParseUint(port, 16, 16)
		if err != nil {
			return nil, fmt.Errorf("local port %q: %w", port, err)
		}
		out = append(out, uint16(n))
	}
	return out, sc.Err()
}
