package translate

import (
	"fmt"
	"regexp"
	"strings"

	"golang.org/x/net/http/httpguts"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/modules/grpcroute"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

// The CEL rules of GRPCMethodMatch for Exact values.
var (
	exactService = regexp.MustCompile(`^(?i)\.?[a-z_][a-z_0-9]*(\.[a-z_][a-z_0-9]*)*$`)
	exactMethod  = regexp.MustCompile(`^[A-Za-z_][A-Za-z_0-9]*$`)
)

// matchError is an invalid match: the field inside the match and why.
type matchError struct {
	field string
	msg   string
}

// translateMatch builds the route.grpc config of one match and its precedence vector.
func translateMatch(m gwapiv1.GRPCRouteMatch) (*grpcroute.Match, []int, *matchError) {
	out := &grpcroute.Match{}
	var service, method int
	if mm := m.Method; mm != nil {
		var err *matchError
		if out.Method, err = methodMatch(mm); err != nil {
			return nil, nil, err
		}
		service, method = len(out.Method.Service), len(out.Method.Method)
	}
	seen := map[string]bool{}
	for i, h := range m.Headers {
		// The spec: only the first of several entries with an equivalent name counts.
		key := strings.ToLower(string(h.Name))
		if seen[key] {
			continue
		}
		seen[key] = true
		hm, err := headerMatch(h, fmt.Sprintf("headers[%d]", i))
		if err != nil {
			return nil, nil, err
		}
		out.Headers = append(out.Headers, hm)
	}
	return out, []int{service, method, len(out.Headers)}, nil
}

func methodMatch(mm *gwapiv1.GRPCMethodMatch) (*grpcroute.MethodMatch, *matchError) {
	out := &grpcroute.MethodMatch{Type: grpcroute.MatchExact}
	if mm.Type != nil && *mm.Type != "" {
		out.Type = string(*mm.Type)
	}
	if mm.Service != nil {
		out.Service = *mm.Service
	}
	if mm.Method != nil {
		out.Method = *mm.Method
	}
	if out.Service == "" && out.Method == "" {
		return nil, &matchError{"method", "one or both of service and method must be specified"}
	}
	switch out.Type {
	case grpcroute.MatchExact:
		if out.Service != "" && !exactService.MatchString(out.Service) {
			return nil, &matchError{"method.service", fmt.Sprintf("invalid service %q (must match %s)", out.Service, exactService)}
		}
		if out.Method != "" && !exactMethod.MatchString(out.Method) {
			return nil, &matchError{"method.method", fmt.Sprintf("invalid method %q (must match %s)", out.Method, exactMethod)}
		}
	case grpcroute.MatchRegularExpression:
		for _, f := range []struct{ field, v string }{{"method.service", out.Service}, {"method.method", out.Method}} {
			if _, err := regexp.Compile(f.v); err != nil {
				return nil, &matchError{f.field, fmt.Sprintf("invalid RE2 regex %q: %v", f.v, err)}
			}
		}
	default:
		return nil, &matchError{"method.type", fmt.Sprintf("unsupported method match type %q", out.Type)}
	}
	return out, nil
}

func headerMatch(h gwapiv1.GRPCHeaderMatch, field string) (grpcroute.HeaderMatch, *matchError) {
	out := grpcroute.HeaderMatch{Type: grpcroute.MatchExact, Name: string(h.Name), Value: h.Value}
	if h.Type != nil && *h.Type != "" {
		out.Type = string(*h.Type)
	}
	if !translation.ValidHeaderName(out.Name) {
		return out, &matchError{field + ".name", fmt.Sprintf("invalid name %q", out.Name)}
	}
	if out.Value == "" {
		return out, &matchError{field + ".value", "value must not be empty"}
	}
	switch out.Type {
	case grpcroute.MatchExact:
		if !httpguts.ValidHeaderFieldValue(out.Value) {
			return out, &matchError{field + ".value", fmt.Sprintf("invalid value %q", out.Value)}
		}
	case grpcroute.MatchRegularExpression:
		if _, err := regexp.Compile(out.Value); err != nil {
			return out, &matchError{field + ".value", fmt.Sprintf("invalid RE2 regex %q: %v", out.Value, err)}
		}
	default:
		return out, &matchError{field + ".type", fmt.Sprintf("unsupported match type %q", out.Type)}
	}
	return out, nil
}
