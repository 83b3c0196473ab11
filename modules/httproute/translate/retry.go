package translate

import (
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

// defaultRetryAttempts is the API's default for a retry stanza without attempts (the CRD sets
// it; manifests read from disk by `serve -f` have not been through the API server).
const defaultRetryAttempts = 1

// retry converts a rule's retry stanza (GEP-1731). No stanza, or attempts 0 (which the spec
// says disables retries), is no retry. Codes outside 400-599 and a malformed backoff are refused
// with the field that holds them.
func retry(r *gwapiv1.HTTPRouteRetry, field string) (*irv1.Retry, *translation.Failure) {
	if r == nil {
		return nil, nil
	}
	attempts := defaultRetryAttempts
	if r.Attempts != nil {
		attempts = *r.Attempts
	}
	if attempts < 0 {
		return nil, translation.Fail(field+".attempts", gwapiv1.RouteReasonUnsupportedValue, "attempts must not be negative, got %d", attempts)
	}
	out := &irv1.Retry{Attempts: uint32(min(attempts, maxRetryAttempts))} //nolint:gosec // bounded above
	for i, c := range r.Codes {
		if c < 400 || c > 599 {
			return nil, translation.Fail(field+".codes", gwapiv1.RouteReasonUnsupportedValue, "codes[%d]: %d is not a status between 400 and 599", i, c)
		}
		out.Codes = append(out.Codes, uint32(c)) //nolint:gosec // checked above
	}
	if r.Backoff != nil {
		ms, err := parseDuration(*r.Backoff)
		if err != nil {
			return nil, translation.Fail(field+".backoff", gwapiv1.RouteReasonUnsupportedValue, "%v", err)
		}
		out.BackoffMs = ms
	}
	if out.Attempts == 0 {
		return nil, nil
	}
	return out, nil
}

// maxRetryAttempts caps attempts: the API sets no maximum, and a retry budget past this is a
// mistake that would hold a request for minutes (the request timeout still bounds it).
const maxRetryAttempts = 1000
