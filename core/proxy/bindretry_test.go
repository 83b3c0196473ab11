package proxy

import (
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"
)

func TestBindReason(t *testing.T) {
	wrap := func(errno syscall.Errno) error {
		return &net.OpError{Op: "listen", Net: "tcp", Err: os.NewSyscallError("bind", errno)}
	}
	cases := []struct {
		name string
		err  error
		want BindReason
	}{
		{"port taken", wrap(syscall.EADDRINUSE), BindAddressInUse},
		{"address not local", wrap(syscall.EADDRNOTAVAIL), BindAddressNotAvailable},
		{"privileged port", wrap(syscall.EACCES), BindPermissionDenied},
		{"wrapped again", fmt.Errorf("binding: %w", wrap(syscall.EADDRINUSE)), BindAddressInUse},
		{"anything else", errors.New("boom"), BindOther},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := bindReason(tc.err); got != tc.want {
				t.Fatalf("bindReason(%v) = %s, want %s", tc.err, got, tc.want)
			}
		})
	}
}
