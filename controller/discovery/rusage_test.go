package discovery_test

import (
	"syscall"
	"time"
)

type runtimeRusage struct{ syscall.Rusage }

func getrusage(ru *runtimeRusage) { _ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru.Rusage) }

func (ru *runtimeRusage) total() time.Duration {
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
