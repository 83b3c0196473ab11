package h1wire

import (
	"bytes"
	"testing"

	"golang.org/x/net/http/httpguts"
)

// FuzzParseField checks header field validation both ways against httpguts: a field line is
// accepted exactly when its name is a token and its value (without the optional white space
// around it) has no control character; what is accepted cannot split a header it is copied into.
func FuzzParseField(f *testing.F) {
	for _, s := range []string{"Host: a", "x-a:\t1 ", "X A: 1", "X-A : 1", ":a", "a:", "a: b\x00c", "a: b\rc", "a: \x7f", "a: é"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		if bytes.ContainsAny(line, "\n") {
			return // a line never holds its LF: readLine cut it there
		}
		raw := bytes.Clone(line)
		fl, err := ParseField(raw, 0, len(raw))
		name, value, found := bytes.Cut(line, []byte(":"))
		value = bytes.Trim(value, " \t")
		valid := found && httpguts.ValidHeaderFieldName(string(name)) && httpguts.ValidHeaderFieldValue(string(value)) &&
			!bytes.ContainsAny(value, "\r")
		if (err == nil) != valid {
			t.Fatalf("%q: ParseField error %v, httpguts says valid=%v", line, err, valid)
		}
		if err != nil {
			return
		}
		k, v := raw[fl.K0:fl.K1], raw[fl.V0:fl.V1]
		if !bytes.EqualFold(k, name) || !bytes.Equal(v, value) {
			t.Fatalf("%q: parsed %q: %q", line, k, v)
		}
	})
}
