package standalone

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	yamlv3 "go.yaml.in/yaml/v3"
)

// Where in a document an error is. The decoders name a field by its path in the JSON the YAML
// became, and sometimes (a wrong type) only by the Go struct fields it crossed; an operator wants
// the line in the file they wrote. These helpers turn either into a JSON path with indices and
// that path into a line of the YAML document.

// typeErrorPath returns the JSON path ("spec.rules[0].backendRefs[0].port") of the value a
// wrong-type decode error is about. The strict decoder's error names Go struct fields without
// indices, so the document is decoded again with encoding/json, whose UnmarshalTypeError says
// where in the input the bad value ends. Empty when that fails.
func typeErrorPath(js []byte, scratch any) string {
	var te *json.UnmarshalTypeError
	if err := json.Unmarshal(js, scratch); !errors.As(err, &te) {
		return ""
	}
	return jsonPathAt(js, te.Offset)
}

// pathFrame is one open object or array while jsonPathAt walks the tokens.
type pathFrame struct {
	array   bool
	key     string
	index   int
	wantKey bool
}

// jsonPathAt returns the path of the innermost value of js that ends at or after offset.
func jsonPathAt(js []byte, offset int64) string {
	dec := json.NewDecoder(bytes.NewReader(js))
	var stack []pathFrame
	path := func() string {
		var b strings.Builder
		for _, f := range stack {
			if f.array {
				b.WriteString("[" + strconv.Itoa(f.index) + "]")
				continue
			}
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(f.key)
		}
		return b.String()
	}
	valueDone := func() {
		if n := len(stack); n > 0 {
			if stack[n-1].array {
				stack[n-1].index++
			} else {
				stack[n-1].wantKey = true
			}
		}
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return ""
			}
			return path()
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			if dec.InputOffset() >= offset {
				return path() // the bad value is this object or array
			}
			stack = append(stack, pathFrame{array: tok == json.Delim('['), wantKey: tok == json.Delim('{')})
			continue
		case json.Delim('}'), json.Delim(']'):
			if dec.InputOffset() >= offset {
				stack = stack[:len(stack)-1]
				return path()
			}
			stack = stack[:len(stack)-1]
			valueDone()
			continue
		}
		if n := len(stack); n > 0 && !stack[n-1].array && stack[n-1].wantKey {
			stack[n-1].key, _ = tok.(string)
			stack[n-1].wantKey = false
			continue
		}
		if dec.InputOffset() >= offset {
			return path()
		}
		valueDone()
	}
}

var pathSegmentRE = regexp.MustCompile(`\[(\d+)\]|[^.\[\]]+`)

// fieldLine returns the line of the file (the document starts at docLine) on which the field at
// path ("spec.rules[0].matches[0].path.value") is written, or 0 when it cannot be found (a key
// with dots in it, a path the YAML does not have).
func fieldLine(body []byte, docLine int, path string) int {
	if path == "" {
		return 0
	}
	var doc yamlv3.Node
	if err := yamlv3.Unmarshal(body, &doc); err != nil || len(doc.Content) == 0 {
		return 0
	}
	node, line := doc.Content[0], 0
	for _, m := range pathSegmentRE.FindAllStringSubmatch(path, -1) {
		for node.Kind == yamlv3.AliasNode && node.Alias != nil {
			node = node.Alias
		}
		switch {
		case m[1] != "":
			i, _ := strconv.Atoi(m[1])
			if node.Kind != yamlv3.SequenceNode || i >= len(node.Content) {
				return 0
			}
			node = node.Content[i]
			line = node.Line
		default:
			if node.Kind != yamlv3.MappingNode {
				return 0
			}
			found := false
			for i := 0; i+1 < len(node.Content); i += 2 {
				if node.Content[i].Value == m[0] {
					line, node, found = node.Content[i].Line, node.Content[i+1], true
					break
				}
			}
			if !found {
				return 0
			}
		}
	}
	if line == 0 {
		return 0
	}
	return line + docLine - 1
}

var yamlErrorLineRE = regexp.MustCompile(`line (\d+)`)

// yamlErrorLine returns the file line a YAML error is on: the one its message names (already made
// a file line by fileLines), else, for bytes YAML never accepts (binary data, a NUL, invalid
// UTF-8), the line of the first of them. 0 when neither.
func yamlErrorLine(msg string, body []byte, docLine int) int {
	if m := yamlErrorLineRE.FindStringSubmatch(msg); m != nil {
		n, _ := strconv.Atoi(m[1])
		return n
	}
	line := docLine
	for i := 0; i < len(body); {
		r, size := utf8.DecodeRune(body[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			return line
		case r == '\n':
			line++
		case r < 0x20 && r != '\t' && r != '\r', r == 0x7f:
			return line
		}
		i += size
	}
	return 0
}
