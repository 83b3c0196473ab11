// Package core is the contract every Coxswain module implements and the registry that holds them.
//
// A module is a type with a namespaced ID ("route.http", "filter.http.request_header_modifier",
// "lb.round_robin", "listener.https"). The namespace says which interface the module implements:
//
//	listener.*      proxy.StreamListener or proxy.PacketListener (package core/proxy, which owns
//	                sockets): turns a bound socket into served connections.
//	route.*         a route kind: HTTPMatcher (route.http, route.grpc), StreamRoute (route.tcp,
//	                route.tls) or DatagramRoute (route.udp).
//	filter.http.*   HTTPRequestFilter, HTTPResponseFilter and/or HTTPMiddleware.
//	filter.ext.*    the same, for ExtensionRef filters (filter.ext.<group>.<kind>).
//	lb.*            Balancer: picks one endpoint of a cluster.
//	translate.*     controller-side translators (the contract is modules/translation); never
//	                loaded by a proxy.
//	acme.dns.*      DNS-01 providers of the ACME client (controller/acme.DNSProvider, a libdns
//	                provider); never loaded by a proxy.
//
// Modules register themselves from init with RegisterModule. The binary's main calls Freeze once;
// nothing registers after that. A snapshot names the modules it needs, and the proxy loads exactly
// those with Load: New → strict JSON decode → Provision → Validate → interface check. Cleanup runs
// when the table that loaded the module is retired.
//
// core imports neither Kubernetes nor fx: it is what a proxy needs, and a proxy holds no Kubernetes
// credentials or client code.
package core
