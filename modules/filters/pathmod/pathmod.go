// Package pathmod is Gateway API's HTTPPathModifier, shared by the redirect and rewrite filters.
package pathmod

// Modifier types, spelled as in Gateway API.
const (
	ReplaceFullPath    = "ReplaceFullPath"
	ReplacePrefixMatch = "ReplacePrefixMatch"
)

// Modifier rewrites a request path.
type Modifier struct {
	Type string `json:"type"`
	// ReplaceFullPath is the new path when Type is ReplaceFullPath.
	ReplaceFullPath string `json:"replaceFullPath,omitempty"`
	// ReplacePrefixMatch replaces MatchedPrefix when Type is ReplacePrefixMatch.
	ReplacePrefixMatch string `json:"replacePrefixMatch,omitempty"`
	// MatchedPrefix is the PathPrefix value of the route match this filter belongs to; the translator
	// fills it in because each IR route carries exactly one match.
	MatchedPrefix string `json:"matchedPrefix,omitempty"`
}
