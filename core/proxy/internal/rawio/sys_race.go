//go:build race

package rawio

import (
	"errors"
	"syscall"
)

// Under the race detector, the ordinary system calls: they record that a write happens before
// the read that sees it (see the package comment).

func read(fd uintptr, p []byte) (int, syscall.Errno) {
	n, err := syscall.Read(int(fd), p)
	return max(n, 0), errnoOf(err)
}

func write(fd uintptr, p []byte) (int, syscall.Errno) {
	n, err := syscall.Write(int(fd), p)
	return max(n, 0), errnoOf(err)
}

func errnoOf(err error) syscall.Errno {
	var errno syscall.Errno
	if err != nil && !errors.As(err, &errno) {
		return syscall.EIO
	}
	return errno
}
