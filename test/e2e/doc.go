// Package e2e runs the real coxswain binary end to end: it builds cmd/coxswain, starts
// `coxswain serve` as a separate process against manifests written into a temp dir, and sends real
// traffic through it to real backends on loopback. Everything is awaited by polling (the admin
// /readyz and /status, or the expected response), never by fixed sleeps.
package e2e
