// Package adminapi serves the controller's and `coxswain serve`'s read-only /api/v1 endpoints
// that come from a translation (routing, problems), from the cluster (events, pod logs,
// manifests), and the authentication in front of them (TokenReview + SubjectAccessReview).
// docs/admin-api.md is their contract: change both together.
//
// Everything here reads what the translator produced (its Result and the Store it read); nothing
// re-derives Gateway API semantics.
package adminapi
