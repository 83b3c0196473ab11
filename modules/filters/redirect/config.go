package redirect

import "github.com/coxswain-labs/coxswain/modules/filters/pathmod"

// ModuleID is the filter this package registers.
const ModuleID = "filter.http.request_redirect"

// Config is Gateway API's HTTPRequestRedirectFilter plus what the translator knows about where the
// filter runs, so the proxy never has to guess.
type Config struct {
	// Scheme, Hostname, Port: unset keeps the request's own (port rules per the spec: an explicit
	// scheme without a port implies that scheme's well-known port, which is then omitted).
	Scheme   string `json:"scheme,omitempty"`
	Hostname string `json:"hostname,omitempty"`
	Port     uint32 `json:"port,omitempty"`
	// Path rewrites the path; nil keeps it.
	Path *pathmod.Modifier `json:"path,omitempty"`
	// StatusCode is 301, 302, 303, 307 or 308; 0 means 302.
	StatusCode int `json:"statusCode,omitempty"`
	// ListenerPort and ListenerScheme are the port and scheme ("http"/"https") of the Gateway
	// listener the route is attached to; used when the request's own cannot be known.
	ListenerPort   uint32 `json:"listenerPort,omitempty"`
	ListenerScheme string `json:"listenerScheme,omitempty"`
}
