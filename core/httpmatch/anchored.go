package httpmatch

import (
	"regexp"
	"regexp/syntax"
)

// Anchored compiles an RE2 expression that must match the whole of a value. Wrapping the text in
// "^(?:" and ")$" is not enough: an unterminated \Q quotes the wrapper itself, so `\Q/a` would
// either fail to compile where the translator accepted it (and reject the whole snapshot at the
// proxy) or match the literal "/a)$". The expression is parsed alone, as the translator checks it,
// and anchored in its syntax tree, which prints back with the groups precedence needs.
func Anchored(expr string) (*regexp.Regexp, error) {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return nil, err
	}
	whole := &syntax.Regexp{Op: syntax.OpConcat, Sub: []*syntax.Regexp{
		{Op: syntax.OpBeginText}, re, {Op: syntax.OpEndText},
	}}
	return regexp.Compile(whole.String())
}
