package standalone

import (
	"fmt"
	"sort"

	"go.uber.org/zap"
)

// Keeping the last good version. A manifest that breaks while the process serves (an editor's
// half-written save, a file truncated or deleted during a reload, a typo that makes a field the
// wrong type) must not take down what it defined: the objects the previous applied load got from
// the broken document keep serving, as loaded then, until the document is fixed or removed. At
// start-up there is nothing to keep, and a broken document is only left out. A file that is gone
// from the directory listing is a removal, not an error: its objects go.

// Kept is an object the load took from the previous applied load because its document broke.
type Kept struct {
	Object ObjectRef `json:"object"`
	// From is where the kept version was loaded from; Because is the error that broke it.
	From    Source `json:"from"`
	Because string `json:"because"`
}

// loadedObject is an object a load decoded, with the kind that decoded it.
type loadedObject struct {
	kind *kind
	obj  object
}

// keepLastGood adds to r, from prev, the objects whose documents broke: the object an error
// names, or, for an error that names none (YAML that does not parse, a file that cannot be
// read), every object prev had from that file that r does not have now.
func (r *Result) keepLastGood(prev *Result) {
	if prev == nil {
		return
	}
	keep := func(ref ObjectRef, because *Error) {
		if _, have := r.Sources[ref]; have {
			return
		}
		lo, ok := prev.objects[ref]
		if !ok {
			return
		}
		obj := lo.obj.DeepCopyObject().(object)
		lo.kind.add(r.Store, obj)
		r.Sources[ref] = prev.Sources[ref]
		r.objects[ref] = loadedObject{kind: lo.kind, obj: obj}
		r.Kept = append(r.Kept, Kept{Object: ref, From: prev.Sources[ref], Because: because.Error()})
	}
	for _, e := range r.Errors {
		if e.Object.Name != "" && e.Reason != ReasonDuplicate {
			if e.Object.Namespace == "" {
				// A namespaced kind with the namespace left out is stored in default.
				if _, ok := prev.objects[ObjectRef{Kind: e.Object.Kind, Namespace: "default", Name: e.Object.Name}]; ok {
					e.Object.Namespace = "default"
				}
			}
			keep(e.Object, e)
			continue
		}
		if e.Object.Name != "" {
			continue
		}
		for _, ref := range prev.refsFrom(e.Source.File) {
			keep(ref, e)
		}
	}
}

// refsFrom lists the objects r loaded from file, in a stable order.
func (r *Result) refsFrom(file string) []ObjectRef {
	var refs []ObjectRef
	for ref, src := range r.Sources {
		if src.File == file {
			refs = append(refs, ref)
		}
	}
	sortRefs(refs)
	return refs
}

// keptFields are the log fields of a kept object.
func keptFields(k Kept) []zap.Field {
	return []zap.Field{zap.String("object", k.Object.String()), zap.String("from", k.From.String()),
		zap.String("because", k.Because)}
}

func (k Kept) String() string {
	return fmt.Sprintf("%s: the last good version (%s) keeps serving", k.Object, k.From)
}

func sortRefs(refs []ObjectRef) {
	sort.Slice(refs, func(i, j int) bool { return refs[i].String() < refs[j].String() })
}
