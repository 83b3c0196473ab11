package standalone

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/coxswain-labs/coxswain/controller/translator"
	"github.com/coxswain-labs/coxswain/core"
)

// Result is what one load of the manifests produced: the objects that decoded, where each came
// from, and every document left out with the reason.
type Result struct {
	Store *translator.Store
	// Sources maps every loaded object to the file and document it came from.
	Sources map[ObjectRef]Source
	// Errors lists the documents left out, in file order.
	Errors []*Error
	// Files are the files read, in the order they were read.
	Files []string
	// Digest is a hash of every file's path and content: equal digests mean nothing changed.
	Digest string
	// Kept are the objects taken from the previous load because their documents broke (LoadOver).
	Kept []Kept

	objects map[ObjectRef]loadedObject

	hash  hash.Hash
	kinds kindSet
}

// SourceOf returns where an object came from, if it came from a file.
func (r *Result) SourceOf(ref ObjectRef) (Source, bool) {
	s, ok := r.Sources[ref]
	return s, ok
}

// namespaceLabel is the label the API server puts on every Namespace.
const namespaceLabel = "kubernetes.io/metadata.name"

// Load reads the manifests at path, of the kinds the core reads and those the modules of reg
// declare (route kinds, ExtensionRef filter resources; reg nil: core.Freeze()): a file (any extension) or a directory, walked recursively for
// *.yaml, *.yml and *.json files in lexical order, skipping hidden files and directories (this also
// skips the "..data" indirection of a mounted ConfigMap). It fails only when path itself cannot be
// read; a bad document becomes an Error in the result and the rest still loads.
func Load(ctx context.Context, path string, reg *core.Registry) (*Result, error) {
	return LoadOver(ctx, path, reg, nil)
}

// LoadOver is Load after prev, the load serving now: an object whose document broke since keeps
// its version from prev (see keepLastGood), listed in Kept. prev nil is Load.
func LoadOver(ctx context.Context, path string, reg *core.Registry, prev *Result) (*Result, error) {
	files, err := ListFiles(path)
	if err != nil {
		return nil, err
	}
	if reg == nil {
		reg = core.Freeze()
	}
	res := &Result{Store: &translator.Store{}, Sources: map[ObjectRef]Source{}, Files: files, hash: sha256.New(), kinds: kindsOf(reg),
		objects: map[ObjectRef]loadedObject{}}
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		res.loadFile(f)
	}
	res.keepLastGood(prev)
	res.addImplicitNamespaces()
	res.Digest = hex.EncodeToString(res.hash.Sum(nil))
	return res, nil
}

// ListFiles returns the manifest files Load reads for path.
func ListFiles(path string) ([]string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("reading manifests: %w", err)
	}
	if !st.IsDir() {
		return []string{path}, nil
	}
	var files []string
	root := dirRoot(path)
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != root && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() || !isManifestName(d.Name()) {
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 {
			// A ConfigMap mount links each key to ..data/<key>; follow links to files only.
			if st, err := os.Stat(p); err != nil || !st.Mode().IsRegular() {
				return nil
			}
		}
		files = append(files, p)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading manifests: %w", err)
	}
	return files, nil
}

// dirRoot returns the directory path to walk: with a trailing separator, so that a root that is a
// symlink to a directory (a mounted volume, ~/config -> elsewhere) is walked rather than reported
// as a single non-directory entry. filepath.WalkDir cleans the paths below it.
func dirRoot(path string) string {
	if strings.HasSuffix(path, string(filepath.Separator)) {
		return path
	}
	return path + string(filepath.Separator)
}

func isManifestName(name string) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// readManifest reads a file of at most MaxFileBytes.
func readManifest(file string) ([]byte, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("the file is over the %s a manifest file may be; not read", mib(MaxFileBytes))
	}
	return data, nil
}

func (r *Result) loadFile(file string) {
	data, err := readManifest(file)
	if err != nil {
		r.Errors = append(r.Errors, &Error{Source: Source{File: file}, Reason: ReasonReadError, Message: err.Error()})
		return
	}
	fmt.Fprintf(r.hash, "%d:%s%d:", len(file), file, len(data))
	r.hash.Write(data)
	docs := []document{{body: data, line: 1}}
	if strings.ToLower(filepath.Ext(file)) != ".json" {
		docs = splitDocuments(data)
	}
	for i, d := range docs {
		if d.body == nil {
			continue
		}
		src := Source{File: file, Doc: i + 1, Line: d.line}
		if len(docs) == 1 {
			src.Doc = 0
		}
		r.loadDocument(src, d)
	}
}

func (r *Result) loadDocument(src Source, d document) {
	if len(d.body) > MaxDocumentBytes {
		r.Errors = append(r.Errors, &Error{Source: src, Reason: ReasonTooLarge, Message: fmt.Sprintf(
			"the document is %s, over the %s a document may be (the Kubernetes API server refuses an object this large too)",
			mib(len(d.body)), mib(MaxDocumentBytes))})
		return
	}
	js, err := yaml.YAMLToJSONStrict(d.body)
	if err != nil {
		msg := fileLines(strings.TrimPrefix(err.Error(), "error converting YAML to JSON: "), d.line)
		if l := yamlErrorLine(msg, d.body, d.line); l > 0 {
			src.Line = l
		}
		r.Errors = append(r.Errors, &Error{Source: src, Reason: ReasonInvalidYAML, Message: msg})
		return
	}
	if s := strings.TrimSpace(string(js)); s == "null" || s == "" {
		return
	}
	if !strings.HasPrefix(strings.TrimSpace(string(js)), "{") {
		r.Errors = append(r.Errors, &Error{Source: src, Reason: ReasonInvalidYAML,
			Message: "a document must be a Kubernetes object (a mapping with apiVersion and kind)"})
		return
	}
	h := readHeader(js)
	if h.APIVersion == "v1" && h.Kind == "List" {
		r.loadList(src, js)
		return
	}
	first := len(r.Errors)
	r.loadObject(src, js, h)
	// Point an error at the line of its field rather than the document's first line.
	for _, e := range r.Errors[first:] {
		if l := fieldLine(d.body, d.line, e.Field); l > 0 {
			e.Source.Line = l
		}
	}
}

// MaxDocumentBytes bounds one YAML or JSON document: 3 MiB, the largest request body the
// Kubernetes API server takes, so nothing a cluster could hold is refused. A bigger document is
// reported and left out rather than parsed (YAML parsing costs many times the input in memory).
const MaxDocumentBytes = 3 << 20

// MaxFileBytes bounds one manifest file; beyond it the file is not read at all.
const MaxFileBytes = 64 << 20

func mib(n int) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// loadList loads the items of a `kind: List` document, as `kubectl get -o yaml` writes them.
func (r *Result) loadList(src Source, js []byte) {
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(js, &list); err != nil {
		r.Errors = append(r.Errors, valueError(src, ObjectRef{Kind: "List"}, err))
		return
	}
	for i, item := range list.Items {
		s := src
		s.Item = i + 1
		r.loadObject(s, item, readHeader(item))
	}
}

func (r *Result) loadObject(src Source, js []byte, h header) {
	ref := ObjectRef{Kind: h.Kind, Namespace: h.Metadata.Namespace, Name: h.Metadata.Name}
	k, ok := r.kinds.lookup(h.APIVersion, h.Kind)
	if !ok {
		r.Errors = append(r.Errors, &Error{Source: src, Object: ref, Reason: ReasonUnknownKind,
			Message: fmt.Sprintf("apiVersion %q kind %q is not a kind Coxswain reads; it reads %s",
				h.APIVersion, h.Kind, r.kinds.names())})
		return
	}
	if k.namespaced && ref.Namespace == "" {
		ref.Namespace = metav1.NamespaceDefault
	}
	if !k.namespaced {
		ref.Namespace = ""
	}
	obj, strict, err := k.decode(js)
	if err != nil {
		r.Errors = append(r.Errors, valueError(src, ref, err))
		return
	}
	if len(strict) > 0 {
		r.Errors = append(r.Errors, fieldErrors(src, ref, strict)...)
		return
	}
	if obj.GetName() == "" {
		r.Errors = append(r.Errors, &Error{Source: src, Object: ref, Field: "metadata.name",
			Reason: ReasonMissingName, Message: "metadata.name is required"})
		return
	}
	if prev, dup := r.Sources[ref]; dup {
		r.Errors = append(r.Errors, &Error{Source: src, Object: ref, Reason: ReasonDuplicate,
			Message: fmt.Sprintf("%s is also defined at %s; keeping that one", ref, prev)})
		return
	}
	obj.GetObjectKind().SetGroupVersionKind(schema.FromAPIVersionAndKind(k.stored, k.kind))
	normalizeMeta(obj, ref.Namespace)
	if k.defaults != nil {
		k.defaults(obj)
	}
	k.add(r.Store, obj)
	r.Sources[ref] = src
	r.objects[ref] = loadedObject{kind: k, obj: obj}
}

// normalizeMeta sets the metadata the API server would: the namespace, generation 1, and the
// Namespace name label.
func normalizeMeta(obj object, namespace string) {
	obj.SetNamespace(namespace)
	if obj.GetGeneration() == 0 {
		obj.SetGeneration(1)
	}
	if ns, ok := obj.(*corev1.Namespace); ok {
		if ns.Labels == nil {
			ns.Labels = map[string]string{}
		}
		ns.Labels[namespaceLabel] = ns.Name
	}
}

// addImplicitNamespaces adds a Namespace for every namespace an object lives in but no file
// declares, as a cluster would have: namespace selectors in allowedRoutes then see them, with the
// kubernetes.io/metadata.name label.
func (r *Result) addImplicitNamespaces() {
	declared := map[string]bool{}
	for _, ns := range r.Store.Namespaces {
		declared[ns.Name] = true
	}
	used := map[string]bool{metav1.NamespaceDefault: true}
	for ref := range r.Sources {
		if ref.Namespace != "" {
			used[ref.Namespace] = true
		}
	}
	names := make([]string, 0, len(used))
	for ns := range used {
		if !declared[ns] {
			names = append(names, ns)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		r.Store.Namespaces = append(r.Store.Namespaces, &corev1.Namespace{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 1, Labels: map[string]string{namespaceLabel: name}},
		})
	}
}

// HasErrors reports whether any document was left out.
func (r *Result) HasErrors() bool { return len(r.Errors) > 0 }

// Err joins the load errors, or returns nil.
func (r *Result) Err() error {
	errs := make([]error, len(r.Errors))
	for i, e := range r.Errors {
		errs[i] = e
	}
	return errors.Join(errs...)
}
