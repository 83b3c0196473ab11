package headers

// Module IDs registered by this package.
const (
	RequestModuleID  = "filter.http.request_header_modifier"
	ResponseModuleID = "filter.http.response_header_modifier"
)

// Config is the config of both header modifiers (Gateway API HTTPHeaderFilter). Set replaces a
// header, Add appends a value, Remove deletes; a name appears in at most one list (the API validates
// it), so they apply as set, add, remove.
type Config struct {
	Set    []Header `json:"set,omitempty"`
	Add    []Header `json:"add,omitempty"`
	Remove []string `json:"remove,omitempty"`
}

// Header is one header name and value.
type Header struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}
