// Package conformance runs the upstream Gateway API conformance suite against Coxswain.
package conformance
