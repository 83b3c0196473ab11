package kubelet

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Network is the pod network, what a bridge CNI plugin sets up: a Linux bridge in the harness's
// network namespace holding the range's first address, and per pod a network namespace joined to
// the bridge by a veth pair, with the next free address of the range and a default route through
// the bridge. Pods reach each other and the harness; nothing reaches beyond the harness's
// namespace because the harness's namespace itself has nowhere else to go.
type Network struct {
	// Bridge is the bridge interface's name, e.g. "cxpods0".
	Bridge string
	// Prefix is the pod range, e.g. 10.244.0.0/16. Its first address is the bridge's.
	Prefix netip.Prefix

	mu   sync.Mutex
	next uint32          // allocation cursor
	used map[uint32]bool // offsets into Prefix
}

// gateway is the bridge's address: the pods' default route.
func (n *Network) gateway() netip.Addr { return n.Prefix.Masked().Addr().Next() }

// Setup creates the bridge. It fails when the bridge exists: a leftover of another run would
// mean two harnesses in one namespace.
func (n *Network) Setup(ctx context.Context) error {
	if !n.Prefix.Addr().Is4() || n.Prefix.Bits() > 30 {
		return fmt.Errorf("pod range %s: need an IPv4 prefix of /30 or wider", n.Prefix)
	}
	gw := netip.PrefixFrom(n.gateway(), n.Prefix.Bits())
	return ipBatch(ctx, "",
		"link add "+n.Bridge+" type bridge",
		"addr add "+gw.String()+" dev "+n.Bridge,
		"link set "+n.Bridge+" up")
}

// Allocate returns the next free pod address. Addresses are handed out round the range, so a
// freed one is reused as late as possible (stale endpoints then point at nobody, not at a
// stranger). The network address, the bridge's and the broadcast address are never handed out.
func (n *Network) Allocate() (netip.Addr, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.used == nil {
		n.used = map[uint32]bool{}
	}
	base := binary.BigEndian.Uint32(n.Prefix.Masked().Addr().AsSlice())
	size := uint32(1) << (32 - n.Prefix.Bits())
	for range size {
		off := 2 + n.next%(size-3) // 2 .. size-2
		n.next++
		if !n.used[off] {
			n.used[off] = true
			var b [4]byte
			binary.BigEndian.PutUint32(b[:], base+off)
			return netip.AddrFrom4(b), nil
		}
	}
	return netip.Addr{}, fmt.Errorf("pod range %s is full", n.Prefix)
}

// Release frees an address.
func (n *Network) Release(a netip.Addr) {
	n.mu.Lock()
	defer n.mu.Unlock()
	base := binary.BigEndian.Uint32(n.Prefix.Masked().Addr().AsSlice())
	delete(n.used, binary.BigEndian.Uint32(a.AsSlice())-base)
}

// sandbox is a pod's network namespace, held by a process that only waits (the "pause"
// container), and the host end of its veth pair.
type sandbox struct {
	cmd  *exec.Cmd
	ip   netip.Addr
	veth string
	done chan struct{}
}

// newSandbox starts the holder process in a new network namespace and plugs it into the bridge:
// eth0 with ip, lo up, default route via the bridge.
func (n *Network) newSandbox(ctx context.Context, ip netip.Addr) (*sandbox, error) {
	cmd := exec.Command("sleep", "infinity")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWNET,
		Setpgid:    true,
		Pdeathsig:  syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the sandbox process: %w", err)
	}
	sb := &sandbox{cmd: cmd, ip: ip, veth: vethName(ip), done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(sb.done)
	}()
	pid := strconv.Itoa(cmd.Process.Pid)
	err := ipBatch(ctx, "",
		"link add "+sb.veth+" type veth peer name eth0 netns "+pid,
		"link set "+sb.veth+" master "+n.Bridge+" up")
	if err == nil {
		err = ipBatch(ctx, sb.netns(),
			"link set lo up",
			"addr add "+netip.PrefixFrom(ip, n.Prefix.Bits()).String()+" dev eth0",
			"link set eth0 up",
			"route add default via "+n.gateway().String()+" dev eth0")
	}
	if err != nil {
		sb.close()
		return nil, err
	}
	return sb, nil
}

func (sb *sandbox) pid() int { return sb.cmd.Process.Pid }

// netns is the path of the sandbox's network namespace, for nsenter.
func (sb *sandbox) netns() string { return fmt.Sprintf("/proc/%d/ns/net", sb.pid()) }

// close kills the holder; the kernel then removes the namespace, eth0 and its veth peer.
func (sb *sandbox) close() {
	_ = sb.cmd.Process.Kill()
	<-sb.done
}

// vethName is the host end's name, derived from the pod address (15 bytes at most).
func vethName(ip netip.Addr) string {
	b := ip.As4()
	return fmt.Sprintf("cxv%02x%02x%02x", b[1], b[2], b[3])
}

// ipBatch runs `ip -batch -` with the commands, inside netns when it is not empty.
func ipBatch(ctx context.Context, netns string, cmds ...string) error {
	args := []string{"ip", "-batch", "-"}
	if netns != "" {
		args = append([]string{"nsenter", "--net=" + netns, "--"}, args...)
	}
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Stdin = strings.NewReader(strings.Join(cmds, "\n") + "\n")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %q: %w: %s", strings.Join(args, " "), cmds, err, bytes.TrimSpace(out.Bytes()))
	}
	return nil
}
