// Package standard is the stock Coxswain distribution: importing it (for side effects) compiles in
// every module the stock binary ships, as Caddy's modules/standard does. The list is the whole
// mechanism. A custom distribution is a main package with a different list of blank imports,
// which is what the builder generates (cmd/<builder>, xcaddy-style); nothing is discovered at run
// time, and a module a snapshot names but the binary lacks is a clear error, not a silent skip.
//
// The bundle is proxy-side only: it must stay free of Kubernetes and fx, because a proxy-only
// build imports it too. The controller half of a package P listed here is, by convention, P/translate
// ("translate.*" modules) when it exists: cmd/coxswain imports those from a file `go generate` writes
// from Packages, and the builder finds them the same way. standard_test.go checks both the list of
// module IDs and that rule.
//
// Packages repeats the import list as data, for the builder: a custom distribution starts from it,
// drops and adds import paths, and writes them into a generated main. A test keeps it equal to the
// imports below.
package standard

import (
	// Listeners.
	_ "github.com/coxswain-labs/coxswain/core/proxy/listener"

	// Route kinds.
	_ "github.com/coxswain-labs/coxswain/modules/grpcroute"
	_ "github.com/coxswain-labs/coxswain/modules/httproute"
	_ "github.com/coxswain-labs/coxswain/modules/ingress"
	_ "github.com/coxswain-labs/coxswain/modules/tcproute"
	_ "github.com/coxswain-labs/coxswain/modules/tlsroute"
	_ "github.com/coxswain-labs/coxswain/modules/udproute"

	// Filters.
	_ "github.com/coxswain-labs/coxswain/modules/filters/basicauth"
	_ "github.com/coxswain-labs/coxswain/modules/filters/clientip"
	_ "github.com/coxswain-labs/coxswain/modules/filters/compression"
	_ "github.com/coxswain-labs/coxswain/modules/filters/cors"
	_ "github.com/coxswain-labs/coxswain/modules/filters/extauth"
	_ "github.com/coxswain-labs/coxswain/modules/filters/headers"
	_ "github.com/coxswain-labs/coxswain/modules/filters/ipaccess"
	_ "github.com/coxswain-labs/coxswain/modules/filters/jwtauth"
	_ "github.com/coxswain-labs/coxswain/modules/filters/mirror"
	_ "github.com/coxswain-labs/coxswain/modules/filters/pathnormalize"
	_ "github.com/coxswain-labs/coxswain/modules/filters/pathregex"
	_ "github.com/coxswain-labs/coxswain/modules/filters/ratelimit"
	_ "github.com/coxswain-labs/coxswain/modules/filters/redirect"
	_ "github.com/coxswain-labs/coxswain/modules/filters/rewrite"
	_ "github.com/coxswain-labs/coxswain/modules/filters/sizelimit"

	// Balancers.
	_ "github.com/coxswain-labs/coxswain/modules/lb/ewma"
	_ "github.com/coxswain-labs/coxswain/modules/lb/hash"
	_ "github.com/coxswain-labs/coxswain/modules/lb/leastconn"
	_ "github.com/coxswain-labs/coxswain/modules/lb/roundrobin"
)

// Packages is the import path of every package this bundle imports, in the order above.
var Packages = []string{
	"github.com/coxswain-labs/coxswain/core/proxy/listener",
	"github.com/coxswain-labs/coxswain/modules/grpcroute",
	"github.com/coxswain-labs/coxswain/modules/httproute",
	"github.com/coxswain-labs/coxswain/modules/ingress",
	"github.com/coxswain-labs/coxswain/modules/tcproute",
	"github.com/coxswain-labs/coxswain/modules/tlsroute",
	"github.com/coxswain-labs/coxswain/modules/udproute",
	"github.com/coxswain-labs/coxswain/modules/filters/basicauth",
	"github.com/coxswain-labs/coxswain/modules/filters/clientip",
	"github.com/coxswain-labs/coxswain/modules/filters/compression",
	"github.com/coxswain-labs/coxswain/modules/filters/cors",
	"github.com/coxswain-labs/coxswain/modules/filters/extauth",
	"github.com/coxswain-labs/coxswain/modules/filters/headers",
	"github.com/coxswain-labs/coxswain/modules/filters/ipaccess",
	"github.com/coxswain-labs/coxswain/modules/filters/jwtauth",
	"github.com/coxswain-labs/coxswain/modules/filters/mirror",
	"github.com/coxswain-labs/coxswain/modules/filters/pathnormalize",
	"github.com/coxswain-labs/coxswain/modules/filters/pathregex",
	"github.com/coxswain-labs/coxswain/modules/filters/ratelimit",
	"github.com/coxswain-labs/coxswain/modules/filters/redirect",
	"github.com/coxswain-labs/coxswain/modules/filters/rewrite",
	"github.com/coxswain-labs/coxswain/modules/filters/sizelimit",
	"github.com/coxswain-labs/coxswain/modules/lb/ewma",
	"github.com/coxswain-labs/coxswain/modules/lb/hash",
	"github.com/coxswain-labs/coxswain/modules/lb/leastconn",
	"github.com/coxswain-labs/coxswain/modules/lb/roundrobin",
}
