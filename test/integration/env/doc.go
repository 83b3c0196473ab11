// Package env starts a real control plane for integration tests: etcd and
// kube-apiserver processes built from their Go modules by build.sh (no
// containers, no downloaded release binaries), with the Gateway API standard
// CRDs installed from the module cache.
//
// Why real processes and not fake clients: Gateway API leans on CRD defaulting
// and CEL validation, server-side apply and status subresources, none of which
// a fake client reproduces. A test that passes here has talked to the same
// API server a cluster runs.
//
// Usage:
//
//	func TestSomething(t *testing.T) {
//		e := env.Start(t)
//		_, err := e.Gateway.GatewayV1().GatewayClasses().Create(ctx, gc, metav1.CreateOptions{})
//		...
//	}
//
// Environment variables:
//
//	COXSWAIN_SKIP_INTEGRATION=1    skip every test that calls Start (the only way to skip)
//	COXSWAIN_K8S_BIN=DIR           where build.sh put the binaries (default <repo>/.cache/k8s-bin)
//	COXSWAIN_INTEGRATION_BUILD=1   let Start run build.sh itself when binaries are missing
//	                               (a cold build takes ~11 min; raise go test -timeout)
//	COXSWAIN_INTEGRATION_VERBOSE=1 stream etcd and kube-apiserver output to stderr
//
// Without COXSWAIN_SKIP_INTEGRATION, missing binaries fail the test with the
// command that builds them: a silently skipped integration suite looks green
// while testing nothing.
package env
