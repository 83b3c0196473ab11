package grpcroute

// ModuleID is the route kind this package registers.
const ModuleID = "route.grpc"

// Match is the config of one route.grpc instance: one GRPCRouteMatch. Every condition set must hold
// (AND); an unset condition matches every gRPC request. The translator emits one IR Route per
// match, so the OR across a rule's matches is the order of IR routes.
type Match struct {
	Method  *MethodMatch  `json:"method,omitempty"`
	Headers []HeaderMatch `json:"headers,omitempty"`
}

// Match types, spelled as in Gateway API.
const (
	MatchExact             = "Exact"
	MatchRegularExpression = "RegularExpression"
)

// MethodMatch matches the service and method of the request path "/<service>/<method>". An empty
// Service or Method matches any. Exact compares case-sensitively; RegularExpression is RE2,
// anchored at both ends, applied to the service and the method separately.
type MethodMatch struct {
	Type    string `json:"type"`
	Service string `json:"service,omitempty"`
	Method  string `json:"method,omitempty"`
}

// HeaderMatch matches one request header (gRPC metadata); the name is case-insensitive. Exact
// compares the value; RegularExpression is RE2 and unanchored, as route.http's.
type HeaderMatch struct {
	Type  string `json:"type"`
	Name  string `json:"name"`
	Value string `json:"value"`
}
