package translate

import (
	"fmt"
	"regexp"
	"strings"

	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/modules/httproute"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

// Path type ranks in the precedence vector (larger wins); see the package doc.
const (
	rankPrefix = 1
	rankRegex  = 2
	rankExact  = 3
)

// defaultMatch is what the API server defaults a rule without matches to.
func defaultMatch() gwapiv1.HTTPRouteMatch {
	t, v := gwapiv1.PathMatchPathPrefix, "/"
	return gwapiv1.HTTPRouteMatch{Path: &gwapiv1.HTTPPathMatch{Type: &t, Value: &v}}
}

// ruleMatches returns the rule's matches, or the default single match.
func ruleMatches(rule *gwapiv1.HTTPRouteRule) []gwapiv1.HTTPRouteMatch {
	if len(rule.Matches) == 0 {
		return []gwapiv1.HTTPRouteMatch{defaultMatch()}
	}
	return rule.Matches
}

// matchError is an invalid match: the field inside the match and why.
type matchError struct {
	field string
	msg   string
}

// translateMatch builds the route.http config of one match and its precedence vector.
func translateMatch(m gwapiv1.HTTPRouteMatch) (*httproute.Match, []int, *matchError) {
	out := &httproute.Match{Path: &httproute.PathMatch{Type: httproute.MatchPathPrefix, Value: "/"}}
	if m.Path != nil {
		if m.Path.Type != nil {
			out.Path.Type = string(*m.Path.Type)
		}
		if m.Path.Value != nil {
			out.Path.Value = *m.Path.Value
		}
	}
	rank, err := checkPath(out.Path)
	if err != nil {
		return nil, nil, err
	}
	if m.Method != nil {
		if !validMethod(*m.Method) {
			return nil, nil, &matchError{"method", fmt.Sprintf("unsupported method %q", *m.Method)}
		}
		out.Method = string(*m.Method)
	}
	seen := map[string]bool{}
	for i, h := range m.Headers {
		// The spec: only the first of several entries with an equivalent name counts.
		key := strings.ToLower(string(h.Name))
		if seen[key] {
			continue
		}
		seen[key] = true
		vm, err := valueMatch(h.Type, string(h.Name), h.Value, fmt.Sprintf("headers[%d]", i))
		if err != nil {
			return nil, nil, err
		}
		out.Headers = append(out.Headers, vm)
	}
	seen = map[string]bool{}
	for i, q := range m.QueryParams {
		if seen[string(q.Name)] {
			continue
		}
		seen[string(q.Name)] = true
		vm, err := valueMatch(q.Type, string(q.Name), q.Value, fmt.Sprintf("queryParams[%d]", i))
		if err != nil {
			return nil, nil, err
		}
		out.QueryParams = append(out.QueryParams, vm)
	}
	method := 0
	if out.Method != "" {
		method = 1
	}
	prec := []int{rank, len(out.Path.Value), method, len(out.Headers), len(out.QueryParams)}
	return out, prec, nil
}

// pathChars is what CEL allows in Exact and PathPrefix values.
var pathChars = regexp.MustCompile(`^(?:[-A-Za-z0-9/._~!$&'()*+,;=:@]|[%][0-9a-fA-F]{2})+$`)

// checkPath applies the API's validation of a path match and returns its precedence rank.
func checkPath(p *httproute.PathMatch) (int, *matchError) {
	switch p.Type {
	case httproute.MatchRegularExpression:
		if _, err := regexp.Compile(p.Value); err != nil {
			return 0, &matchError{"path.value", fmt.Sprintf("invalid RE2 regex %q: %v", p.Value, err)}
		}
		return rankRegex, nil
	case httproute.MatchExact, httproute.MatchPathPrefix:
	default:
		return 0, &matchError{"path.type", fmt.Sprintf("unsupported path match type %q", p.Type)}
	}
	v := p.Value
	var why string
	switch {
	case !strings.HasPrefix(v, "/"):
		why = "must be an absolute path starting with '/'"
	case strings.Contains(v, "//"), strings.Contains(v, "/./"), strings.Contains(v, "/../"),
		strings.Contains(v, "%2f"), strings.Contains(v, "%2F"), strings.Contains(v, "#"),
		strings.HasSuffix(v, "/.."), strings.HasSuffix(v, "/."):
		why = "must not contain '//', '/./', '/../', '%2f', '#' nor end with '/.' or '/..'"
	case !pathChars.MatchString(v):
		why = "contains characters not allowed in a path"
	}
	if why != "" {
		return 0, &matchError{"path.value", fmt.Sprintf("path %q %s", v, why)}
	}
	if p.Type == httproute.MatchExact {
		return rankExact, nil
	}
	return rankPrefix, nil
}

func valueMatch[T ~string](typ *T, name, value, field string) (httproute.ValueMatch, *matchError) {
	t := httproute.MatchExact
	if typ != nil && *typ != "" {
		t = string(*typ)
	}
	vm := httproute.ValueMatch{Type: t, Name: name, Value: value}
	if !translation.ValidHeaderName(name) {
		return vm, &matchError{field + ".name", fmt.Sprintf("invalid name %q", name)}
	}
	switch t {
	case httproute.MatchExact:
	case httproute.MatchRegularExpression:
		if _, err := regexp.Compile(value); err != nil {
			return vm, &matchError{field + ".value", fmt.Sprintf("invalid RE2 regex %q: %v", value, err)}
		}
	default:
		return vm, &matchError{field + ".type", fmt.Sprintf("unsupported match type %q", t)}
	}
	return vm, nil
}

func validMethod(m gwapiv1.HTTPMethod) bool {
	switch m {
	case gwapiv1.HTTPMethodGet, gwapiv1.HTTPMethodHead, gwapiv1.HTTPMethodPost, gwapiv1.HTTPMethodPut,
		gwapiv1.HTTPMethodDelete, gwapiv1.HTTPMethodConnect, gwapiv1.HTTPMethodOptions,
		gwapiv1.HTTPMethodTrace, gwapiv1.HTTPMethodPatch:
		return true
	}
	return false
}
