// Package integration runs the controller against a real kube-apiserver and etcd
// (test/integration/env), with real proxies and real backends, inside a private network namespace
// (test/integration/netns) so backends can have the non-loopback addresses EndpointSlices require.
package integration

import (
	"os"
	"testing"

	"github.com/coxswain-labs/coxswain/test/integration/netns"
)

func TestMain(m *testing.M) { os.Exit(netns.Run(m)) }
