// Package netns runs a test binary inside a private network namespace, so integration tests can
// give backends real, non-loopback addresses (which the API server requires of EndpointSlices)
// without ever sending a packet off the machine.
//
// TestMain calls Run. The first invocation re-executes the test binary in a new network namespace
// (CLONE_NEWNET; plus a user namespace when not root); inside it, the loopback interface is
// brought up and Range is routed locally on it, so any address in Range can be bound and dialed
// like 127.0.0.1; HostIP on lo and a default route through lo give kube-apiserver the address it
// insists on advertising. kube-apiserver, etcd and every other child process share the namespace. Nothing
// in the namespace can reach the host's network: it has no interface but lo, which Run checks
// before a single test starts.
package netns

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"testing"
)

// Range is routed to the loopback interface inside the namespace.
const Range = "10.99.0.0/16"

// HostIP is the namespace's "host" address on lo, the one kube-apiserver advertises.
const HostIP = "10.99.255.254"

// marker tells the re-executed binary that it already runs in its own namespace.
const marker = "COXSWAIN_TEST_NETNS"

// Run runs m inside a private network namespace and returns the exit code for os.Exit.
func Run(m *testing.M) int {
	if os.Getenv(marker) != "1" {
		return reexec()
	}
	if err := setup(); err != nil {
		fmt.Fprintf(os.Stderr, "netns: %v\n", err)
		return 1
	}
	return m.Run()
}

func reexec() int {
	// Pdeathsig is tied to the thread that starts the child: keep it alive.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cmd := exec.Command("/proc/self/exe", os.Args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), marker+"=1")
	attr := &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Pdeathsig: syscall.SIGKILL}
	if uid, gid := os.Geteuid(), os.Getegid(); uid != 0 {
		attr.Cloneflags |= syscall.CLONE_NEWUSER
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: gid, Size: 1}}
	}
	cmd.SysProcAttr = attr
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit) && exit.ExitCode() >= 0:
		return exit.ExitCode()
	default:
		fmt.Fprintf(os.Stderr, "netns: running the tests in a new network namespace: %v\n"+
			"(needs root, or unprivileged user namespaces; and iproute2's ip)\n", err)
		return 1
	}
}

// setup checks the namespace is private and routes Range to lo.
func setup() error {
	ifs, err := net.Interfaces()
	if err != nil {
		return err
	}
	for _, i := range ifs {
		if i.Flags&net.FlagLoopback == 0 {
			return fmt.Errorf("interface %s in what should be a private network namespace; refusing to run", i.Name)
		}
	}
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		{"route", "add", "local", Range, "dev", "lo"},
		// kube-apiserver advertises the global address of the default route's interface, and
		// refuses to start without one. Both stay inside the namespace: lo is all there is.
		{"addr", "add", HostIP + "/32", "dev", "lo"},
		{"route", "add", "default", "dev", "lo"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %v: %v: %s", args, err, out)
		}
	}
	return nil
}
