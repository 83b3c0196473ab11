// Package controller is Coxswain in a cluster: the only reader of the Kubernetes API.
//
// Shared informers (typed clientsets from client-go and gateway-api) fill a translator.Store.
// Changes are paced (coalesce.go): the first change after a quiet spell is translated at once, a
// burst becomes a few translations spaced by a gap that starts at Options.Holdoff and grows with
// the change rate, and no change waits longer than Options.MaxDelay. Each translation yields a
// sealed snapshot, handed to a Publisher only when its version changed, and the desired status of
// every object we own, handed to the single status writer (controller/status).
//
// Only the leader of a coordination.k8s.io Lease translates, publishes and writes status; a standby
// keeps its caches warm and takes over when the lease expires or is released. A leadership term
// owns its Publisher and status Writer: both are created when it starts and closed when it ends.
//
// The Publisher is the seam between the controller and the data plane: the discovery gRPC server
// (controller/discovery) that streams snapshots to separate proxy processes, or an in-process
// proxy (controller/inprocess) for single-process setups and tests. A Publisher tells its
// Reporter which Gateway generations the data plane has bound and acknowledged, and only those
// are stamped Programmed; until then it says what they wait for.
package controller
