package proxy

import (
	"net/http"

	"github.com/coxswain-labs/coxswain/core"
)

// sticky is a cluster's session persistence. Placeholder until it lands: it pins nothing.
type sticky struct{}

// pinned returns the current endpoint r's session is pinned to, nil when none.
func (s *sticky) pinned(*http.Request) *core.Endpoint { return nil }

// pin makes ep the session's endpoint for the client's next requests (Cookie: sets the cookie on
// w unless r already carried ep's token).
func (s *sticky) pin(http.ResponseWriter, *http.Request, *core.Endpoint) {}
