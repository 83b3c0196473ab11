// Package ingress is the proxy half of networking.k8s.io/v1 Ingress: the route.ingress matcher.
// It is route.http's matcher (modules/httproute) with one condition more, the Ingress host of
// the rule, because an Ingress rule's host is part of its match in a way a Gateway API hostname
// is not: a wildcard "*.example.com" matches exactly one label ("a.example.com", never
// "a.b.example.com" nor "example.com"), and the translator places an Ingress's rules of every
// host on the same virtual hosts of the implicit Ingress listeners.
//
// The controller half is package translate (module translate.route.ingress).
package ingress
