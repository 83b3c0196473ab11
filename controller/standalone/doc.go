// Package standalone runs Coxswain without a cluster: it reads Gateway API and core Kubernetes
// objects from YAML/JSON files, fills the same translator.Store the controller's informers fill,
// translates it and applies the snapshot to an in-process proxy. It also watches the files and
// reloads on change.
//
// What the API server would do for a cluster (strict schema decoding, CRD defaults, namespace and
// generation defaults, merging a Secret's stringData) the loader does here, so the translator sees
// the same objects in both modes. What it cannot know (the validation of CRD CEL rules) is left to
// the translator, which reports it as Problems.
package standalone
