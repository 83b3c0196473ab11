package rewrite

import "github.com/coxswain-labs/coxswain/modules/filters/pathmod"

// ModuleID is the filter this package registers.
const ModuleID = "filter.http.url_rewrite"

// Config is Gateway API's HTTPURLRewriteFilter.
type Config struct {
	// Hostname replaces the Host header sent upstream; empty keeps it.
	Hostname string `json:"hostname,omitempty"`
	// Path rewrites the path; nil keeps it.
	Path *pathmod.Modifier `json:"path,omitempty"`
}
