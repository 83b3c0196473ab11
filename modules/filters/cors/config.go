package cors

// ModuleID is the filter this package registers.
const ModuleID = "filter.http.cors"

// DefaultMaxAge is Access-Control-Max-Age when the filter sets none, as the API defaults it.
const DefaultMaxAge = 5

// Config is Gateway API's HTTPCORSFilter, as the translator validated it.
type Config struct {
	// AllowOrigins are "*", or origins "<scheme>://<host>[:<port>]" whose host may start with
	// "*." (any number of labels) or be "*".
	AllowOrigins     []string `json:"allowOrigins,omitempty"`
	AllowCredentials bool     `json:"allowCredentials,omitempty"`
	// AllowMethods are method names, or "*".
	AllowMethods []string `json:"allowMethods,omitempty"`
	// AllowHeaders and ExposeHeaders are header names, or "*".
	AllowHeaders  []string `json:"allowHeaders,omitempty"`
	ExposeHeaders []string `json:"exposeHeaders,omitempty"`
	// MaxAge is how long a browser may cache a preflight's answer, in seconds; 0 is DefaultMaxAge.
	MaxAge int32 `json:"maxAge,omitempty"`
}
