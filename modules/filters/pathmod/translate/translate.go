// Package translate validates Gateway API HTTPPathModifiers into pathmod.Modifier, for the
// redirect and rewrite filter translators. It registers no module.
package translate

import (
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/modules/filters/pathmod"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

// Modifier validates p (at field) for a rule described by env: ReplacePrefixMatch needs the
// rule's single PathPrefix match, whose value the modifier carries.
func Modifier(p *gwapiv1.HTTPPathModifier, field string, env translation.FilterEnv) (*pathmod.Modifier, *translation.Failure) {
	switch p.Type {
	case gwapiv1.FullPathHTTPPathModifier:
		if p.ReplaceFullPath == nil {
			return nil, translation.Fail(field+".replaceFullPath", gwapiv1.RouteReasonUnsupportedValue, "replaceFullPath must be set for type ReplaceFullPath")
		}
		return &pathmod.Modifier{Type: pathmod.ReplaceFullPath, ReplaceFullPath: *p.ReplaceFullPath}, nil
	case gwapiv1.PrefixMatchHTTPPathModifier:
		if p.ReplacePrefixMatch == nil {
			return nil, translation.Fail(field+".replacePrefixMatch", gwapiv1.RouteReasonUnsupportedValue, "replacePrefixMatch must be set for type ReplacePrefixMatch")
		}
		if !env.HasPrefix {
			return nil, translation.Fail(field+".type", gwapiv1.RouteReasonUnsupportedValue, "ReplacePrefixMatch requires the rule to have exactly one PathPrefix match")
		}
		return &pathmod.Modifier{Type: pathmod.ReplacePrefixMatch, ReplacePrefixMatch: *p.ReplacePrefixMatch, MatchedPrefix: env.Prefix}, nil
	}
	return nil, translation.Fail(field+".type", gwapiv1.RouteReasonUnsupportedValue, "unknown path modifier type %q", p.Type)
}
