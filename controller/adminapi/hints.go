package adminapi

// hints say, per condition reason, what usually fixes a problem reported with it. A reason
// without an entry gets no hint: the message alone must then say enough.
var hints = map[string]string{
	// Routes.
	"BackendNotFound": "Create the Service (or the backend object) the backendRef names, or fix backendRefs[].name, namespace and port; " +
		"a backend in another namespace also needs a ReferenceGrant there.",
	"RefNotPermitted": "Add a ReferenceGrant in the referenced object's namespace that allows this kind from this namespace, " +
		"or move the object into the route's (or Gateway's) namespace.",
	"InvalidKind":                "Point the reference at a kind Coxswain supports: a core Service for backends, a Secret for certificates.",
	"NoMatchingParent":           "Check parentRefs[].name, namespace, sectionName and port against the Gateway's listeners.",
	"NotAllowedByListeners":      "The listener's allowedRoutes excludes this route: allow its namespace (allowedRoutes.namespaces) and kind (allowedRoutes.kinds), or attach it to another listener.",
	"NoMatchingListenerHostname": "None of spec.hostnames intersects the listener's hostname: add a matching hostname, or attach to a listener whose hostname covers it.",
	"UnsupportedValue":           "The field names a value this build does not implement; use one listed in the message.",
	"UnsupportedProtocol":        "Use a protocol a compiled-in route kind serves (HTTP, HTTPS, TLS, TCP, UDP); `coxswain list-modules` lists them.",
	"HostnameConflict":           "Two route kinds claim one hostname on a listener; give one of them another hostname or listener.",
	"ShadowedByOlderRoute":       "An older route of the same kind owns the listener or hostname; delete one, or give them different hostnames or listeners.",
	"FilterNotFound":             "Create the object the ExtensionRef names in the route's namespace, or fix the filter's group, kind and name.",
	"SecretNotFound":             "Create the Secret in the named namespace (and a ReferenceGrant if it is another namespace), or fix the reference.",
	"ModulesUnavailable":         "A proxy lacks a module these rules need: run a proxy build that includes it (`coxswain list-modules`), or remove the filter.",
	"Pending":                    "Waiting for a proxy: check that proxies are running and connected (/api/v1/fleet) and that they can bind the listener ports.",
	// Listeners.
	"InvalidCertificateRef": "The listener's certificateRefs must name a kubernetes.io/tls Secret with a certificate and key that parse and match.",
	"PortUnavailable":       "The port is in use or not allowed on the proxies: free it, pick another port, or check the proxies' failedListeners in /api/v1/fleet.",
	"ProtocolConflict":      "Two listeners on one port use different protocols: give one of them another port.",
	"InvalidRouteKinds":     "allowedRoutes.kinds names a kind this listener's protocol cannot carry; remove it.",
	"InvalidListenerFilter": "Fix the listener filter named in the message, or remove it.",
	// Gateways and classes.
	"InvalidParameters":  "Coxswain supports no parametersRef here; remove it, or point it at a kind the docs list.",
	"UnsupportedAddress": "Use an address type Coxswain supports (IPAddress), or drop spec.addresses to get one assigned.",
	"AddressNotUsable":   "The address cannot be bound by the proxies: use one on their hosts, or one from the controller's --gateway-address-pool.",
	"AddressNotAssigned": "The address pool is used up or not configured: widen --gateway-address-pool, or set spec.addresses.",
	"ListenersNotValid":  "See the listeners' own conditions (status.listeners[]) for which one is wrong and why.",
	"NoResources":        "The provisioner could not create the Gateway's objects; see the controller's log and /api/v1/events.",
	// Policies.
	"Invalid":        "The policy's spec is invalid; the message names the field.",
	"Conflicted":     "Another policy of this kind already targets the object; the older one wins. Merge them or target different objects.",
	"TargetNotFound": "Create the object the policy's targetRef names, or fix its group, kind and name.",
	// Build.
	"NoRouteKinds":        "This distribution has no route-kind module: build it with at least modules/httproute/translate.",
	"InvalidFilterModule": "Two filter modules in this build do not fit together; rebuild the distribution without one of them.",
	"InvalidObject":       "The stored object is not of the Go type its kind expects; this is a bug in the distribution, report it.",
}

// HintFor returns what usually fixes a problem with reason, or "".
func HintFor(reason string) string { return hints[reason] }
