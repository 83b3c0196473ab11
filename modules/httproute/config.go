package httproute

// ModuleID is the route kind this package registers.
const ModuleID = "route.http"

// Match is the config of one route.http instance: one HTTPRouteMatch. Every condition set must hold
// (AND); an unset condition matches everything. The translator emits one IR Route per match, so the
// OR across a rule's matches is the order of IR routes, not something this module evaluates.
type Match struct {
	Path        *PathMatch   `json:"path,omitempty"`
	Method      string       `json:"method,omitempty"`
	Headers     []ValueMatch `json:"headers,omitempty"`
	QueryParams []ValueMatch `json:"queryParams,omitempty"`
}

// Match types, spelled as in Gateway API.
const (
	MatchExact             = "Exact"
	MatchPathPrefix        = "PathPrefix"
	MatchRegularExpression = "RegularExpression"
)

// PathMatch matches the request path. Exact compares the whole path; PathPrefix compares element-wise
// ("/abc" matches "/abc" and "/abc/x", not "/abcd"); RegularExpression is RE2, anchored at both ends.
type PathMatch struct {
	Type  string `json:"type"`
	Value string `json:"value"`
}

// ValueMatch matches one header (name case-insensitive) or query parameter (name case-sensitive).
// Exact compares the value; RegularExpression is RE2 and unanchored.
type ValueMatch struct {
	Type  string `json:"type"`
	Name  string `json:"name"`
	Value string `json:"value"`
}
