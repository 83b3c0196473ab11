// Package console is the operator console: one static page (HTML, CSS and plain JavaScript,
// embedded with go:embed, no build step) that the controller serves at GET / on its admin
// address, and standalone `coxswain serve` on its own. The page reads only the read-only JSON
// admin API (/api/v1/...) of the process that served it, and in standalone mode also /status, so
// it has no state of its own and needs nothing but the binary.
//
// Every value the page shows comes from Kubernetes objects a user wrote; the script inserts it
// with textContent only, and the Content-Security-Policy the handler sets forbids inline script,
// so an object named like markup shows as text.
package console
