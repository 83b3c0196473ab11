// Package dedicated is the dedicated deployment mode: a Gateway whose parametersRef (its own
// spec.infrastructure.parametersRef, else its GatewayClass's spec.parametersRef) names a
// CoxswainGatewayParameters runs on a proxy pool of its own. This package resolves that
// reference (Resolve), validates the parameters (Validate) and renders the pool's objects
// (Render): pure functions, no API calls. controller/provision applies what Render returns
// through its DedicatedRenderer seam (renderer.go), owned by the Gateway so that the garbage
// collector deletes them with it.
package dedicated
