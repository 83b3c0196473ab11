package proxy

import (
	"errors"
	"net"
	"net/http"
	"syscall"
)

// upstreamError is why an exchange with an endpoint failed before its answer: the reason label of
// coxswain_proxy_upstream_errors_total.
type upstreamError uint8

const (
	errConnectRefused upstreamError = iota // nothing listens (or a firewall rejects)
	errConnectTimeout                      // the cluster's connect timeout passed
	errConnectTLS                          // the upstream TLS handshake failed (BackendTLSPolicy)
	errConnectOther                        // any other dial failure (unreachable network, ...)
	errTimeout                             // connected, but no answer in time (504)
	errReset                               // the connection broke before the answer (502)
	numUpstreamErrors
)

var upstreamErrorLabels = [numUpstreamErrors]string{"connect_refused", "connect_timeout", "connect_tls", "connect_other", "timeout", "reset"}

// upstreamErrorOf classifies err, the failure of an exchange that produced no answer (not a
// client that went away: upstreamStatus says which).
func upstreamErrorOf(err error, status int) upstreamError {
	var tlsErr *errUpstreamTLS
	if errors.As(err, &tlsErr) {
		return errConnectTLS
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		switch {
		case op.Timeout():
			return errConnectTimeout
		case errors.Is(err, syscall.ECONNREFUSED):
			return errConnectRefused
		}
		return errConnectOther
	}
	if status == http.StatusGatewayTimeout {
		return errTimeout
	}
	return errReset
}

// connectErrorOf classifies err, the failure of a layer-4 route's connect (the dial, then the
// upstream TLS handshake of a TLSRoute with a BackendTLSPolicy): always one of the connect_
// reasons, since a stream has no answer to wait for.
func connectErrorOf(err error) upstreamError {
	if e := upstreamErrorOf(err, 0); e <= errConnectOther {
		return e
	}
	return errConnectOther
}

// countUpstreamError counts a failed exchange of the request w answers under its route and
// backend, when request metrics are on. Called by the forwarders before a retry may absorb the
// failure, so retried tries count too.
func countUpstreamError(w http.ResponseWriter, r *http.Request, err error) {
	rec := recordOf(w)
	if rec == nil || rec.rt == nil || rec.rt.obs == nil {
		return
	}
	status, ok := upstreamStatus(r, err)
	if !ok {
		return // the client went away: not the upstream's failure
	}
	if st := status; st != http.StatusBadGateway && st != http.StatusGatewayTimeout {
		return // a filter refused the request body (core.StatusError)
	}
	o := rec.rt.obs
	o.backend(rec.cluster).upstreamError(o.series, upstreamErrorOf(err, status))
}
