package standalone

import (
	"fmt"
	"strings"
)

// Source says where an object came from: a file, the 1-based index of the YAML document in it and
// the line that document starts on. Item is the 1-based index inside a `kind: List` document, 0
// otherwise.
type Source struct {
	File string `json:"file"`
	Doc  int    `json:"document,omitempty"`
	Line int    `json:"line,omitempty"`
	Item int    `json:"item,omitempty"`
}

// String formats the source as "file:line (document N)", the way editors and compilers name places.
func (s Source) String() string {
	var b strings.Builder
	b.WriteString(s.File)
	if s.Line > 0 {
		fmt.Fprintf(&b, ":%d", s.Line)
	}
	var parts []string
	if s.Doc > 0 {
		parts = append(parts, fmt.Sprintf("document %d", s.Doc))
	}
	if s.Item > 0 {
		parts = append(parts, fmt.Sprintf("item %d", s.Item))
	}
	if len(parts) > 0 {
		b.WriteString(" (" + strings.Join(parts, ", ") + ")")
	}
	return b.String()
}

// ObjectRef names an object as errors, logs and statuses do: its kind, namespace and name. The
// namespace is empty for cluster-scoped kinds.
type ObjectRef struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// String formats the reference as "Kind namespace/name" (or "Kind name" when cluster-scoped).
func (r ObjectRef) String() string {
	switch {
	case r.Kind == "" && r.Name == "":
		return ""
	case r.Namespace == "":
		return strings.TrimSpace(r.Kind + " " + r.Name)
	default:
		return strings.TrimSpace(r.Kind + " " + r.Namespace + "/" + r.Name)
	}
}

// Reasons a document is rejected by the loader.
const (
	ReasonReadError    = "ReadError"
	ReasonInvalidYAML  = "InvalidYAML"
	ReasonUnknownKind  = "UnknownKind"
	ReasonUnknownField = "UnknownField"
	ReasonInvalidValue = "InvalidValue"
	ReasonMissingName  = "MissingName"
	ReasonDuplicate    = "Duplicate"
	ReasonTooLarge     = "TooLarge"
)

// Error is one document the loader left out, and why. It names the file and document, the object
// when it could be identified, the field when one is to blame, and a reason a program can switch on.
type Error struct {
	Source  Source    `json:"source"`
	Object  ObjectRef `json:"object,omitzero"`
	Field   string    `json:"field,omitempty"`
	Reason  string    `json:"reason"`
	Message string    `json:"message"`
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Source.String())
	if o := e.Object.String(); o != "" {
		b.WriteString(": ")
		b.WriteString(o)
	}
	if e.Field != "" {
		b.WriteString(": field ")
		b.WriteString(e.Field)
	}
	b.WriteString(": ")
	b.WriteString(e.Reason)
	b.WriteString(": ")
	b.WriteString(e.Message)
	return b.String()
}
