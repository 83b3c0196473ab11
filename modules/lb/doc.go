// Package lb is the home of Coxswain's load-balancing modules: the "lb.*" namespace.
//
// A module in this namespace implements core.Balancer. The contract:
//
//   - One instance is loaded per cluster per table build, with the cluster's IR `balancer`
//     ModuleConfig as its config (strictly decoded); a cluster that names none gets
//     core.DefaultBalancer ("lb.round_robin").
//   - SetEndpoints is called once, before the first Pick, with the cluster's endpoints. Endpoint
//     weights are at least 1. The slice and the endpoints are the table's: read them, never modify
//     them except through Endpoint.Active.
//   - Pick runs concurrently on the request hot path: no locks held across calls, no allocation, no
//     I/O. It returns nil when no endpoint can be chosen; the engine answers 503.
//   - Endpoint.Active is maintained by the engine (incremented around each upstream request), so
//     least-connection style balancers read it and never write it.
//   - core.BalancerFeedback, if implemented, is told when each pick's exchange ended, how long it
//     took and whether it failed (lb.ewma learns latencies from it); the engine calls it only for
//     balancers that implement it.
//   - Cleanup (core.CleanerUpper), if implemented, runs when the table is retired and drained.
//
// Each balancer is its own package under modules/lb/<name> that registers itself from init, e.g.
// modules/lb/roundrobin registers "lb.round_robin" (also lb.least_conn, lb.ewma, lb.hash; see
// docs/load-balancing.md, and modules/lb/lbtest for tests through the real engine). IDs with more labels ("lb.hash.header") are
// fine: the namespace is everything before the last label.
package lb
