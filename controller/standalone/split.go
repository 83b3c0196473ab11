package standalone

import (
	"bytes"
	"regexp"
	"strconv"
)

// document is one YAML document of a file and the 1-based line its body starts on.
type document struct {
	body []byte
	line int
}

// splitDocuments cuts a multi-document YAML stream at its "---" separators, remembering where each
// document starts so errors can name the file's line rather than the document's. Documents that
// hold nothing but blanks and comments are kept (with a nil body) so that document indexes match
// what a reader counts in the file.
func splitDocuments(data []byte) []document {
	var docs []document
	start, startLine, line := 0, 1, 1
	for off := 0; off <= len(data); {
		end := bytes.IndexByte(data[off:], '\n')
		next := len(data) + 1
		if end >= 0 {
			end += off
			next = end + 1
		} else {
			end = len(data)
		}
		if isSeparator(data[off:end]) {
			if off > start || len(docs) > 0 {
				docs = append(docs, document{body: data[start:off], line: startLine})
			}
			start, startLine = next, line+1
		}
		off = next
		line++
	}
	if start <= len(data) {
		docs = append(docs, document{body: data[start:], line: startLine})
	}
	for i := range docs {
		if isBlank(docs[i].body) {
			docs[i].body = nil
		}
	}
	return docs
}

// isSeparator reports whether a line is a YAML document start marker: "---" alone or followed by
// white space (and maybe a comment or an inline value, which we do not support and treat as a start).
func isSeparator(line []byte) bool {
	line = bytes.TrimRight(line, "\r")
	if !bytes.HasPrefix(line, []byte("---")) {
		return false
	}
	return len(line) == 3 || line[3] == ' ' || line[3] == '\t'
}

// isBlank reports whether a document holds only white space and comments.
func isBlank(body []byte) bool {
	for _, l := range bytes.Split(body, []byte("\n")) {
		l = bytes.TrimSpace(l)
		if len(l) > 0 && l[0] != '#' {
			return false
		}
	}
	return true
}

var yamlLineRE = regexp.MustCompile(`line (\d+)`)

// fileLines rewrites the "line N" of a YAML parser message, which counts from the document's start,
// into a line of the file.
func fileLines(msg string, docLine int) string {
	return yamlLineRE.ReplaceAllStringFunc(msg, func(m string) string {
		n, err := strconv.Atoi(m[len("line "):])
		if err != nil {
			return m
		}
		return "line " + strconv.Itoa(n+docLine-1)
	})
}
