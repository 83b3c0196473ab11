package core

import (
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
)

var (
	modulesMu sync.Mutex
	modules   = map[ModuleID]ModuleInfo{}
	frozen    *Registry
)

// RegisterModule adds a module to the binary. Call it only from an init function. It panics on a
// programmer error: an empty or malformed ID, a nil constructor, a duplicate ID, or registration
// after Freeze.
func RegisterModule(m Module) {
	info := m.CoxswainModule()
	if err := checkID(info.ID); err != nil {
		panic(fmt.Sprintf("core.RegisterModule: %v", err))
	}
	if info.New == nil {
		panic(fmt.Sprintf("core.RegisterModule: module %q has no New function", info.ID))
	}
	modulesMu.Lock()
	defer modulesMu.Unlock()
	if frozen != nil {
		panic(fmt.Sprintf("core.RegisterModule: module %q registered after the registry was frozen", info.ID))
	}
	if prev, dup := modules[info.ID]; dup {
		// Both Go packages are named: in a custom distribution the two registrations usually come
		// from different modules, and the builder reports this line as the reason a build failed.
		panic(fmt.Sprintf("core.RegisterModule: module %q registered twice: by package %s and by package %s",
			info.ID, modulePackage(prev), modulePackage(info)))
	}
	modules[info.ID] = info
}

// modulePackage is the Go package that declares the type info.New returns.
func modulePackage(info ModuleInfo) string {
	t := reflect.TypeOf(info.New())
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.PkgPath() == "" {
		return "(unknown)"
	}
	return t.PkgPath()
}

func checkID(id ModuleID) error {
	if id == "" {
		return fmt.Errorf("empty module ID")
	}
	for _, label := range strings.Split(string(id), ".") {
		if label == "" {
			return fmt.Errorf("module ID %q has an empty label", id)
		}
	}
	if id.Namespace() == "" {
		return fmt.Errorf("module ID %q has no namespace", id)
	}
	return nil
}

// Registry is the frozen, read-only set of modules compiled into the binary.
type Registry struct {
	byID map[ModuleID]ModuleInfo
	ids  []ModuleID // sorted
}

// Freeze closes registration and returns the registry. The first call freezes; later calls return
// the same registry.
func Freeze() *Registry {
	modulesMu.Lock()
	defer modulesMu.Unlock()
	if frozen == nil {
		frozen = newRegistry(modules)
	}
	return frozen
}

// NewRegistry builds a registry from an explicit module list. Tests use it to make a registry that
// lacks or adds modules without touching the global one.
func NewRegistry(mods ...Module) *Registry {
	m := make(map[ModuleID]ModuleInfo, len(mods))
	for _, mod := range mods {
		info := mod.CoxswainModule()
		m[info.ID] = info
	}
	return newRegistry(m)
}

func newRegistry(m map[ModuleID]ModuleInfo) *Registry {
	r := &Registry{byID: make(map[ModuleID]ModuleInfo, len(m))}
	for id, info := range m {
		r.byID[id] = info
		r.ids = append(r.ids, id)
	}
	sort.Slice(r.ids, func(i, j int) bool { return r.ids[i] < r.ids[j] })
	return r
}

// Lookup returns the module registered under id.
func (r *Registry) Lookup(id ModuleID) (ModuleInfo, bool) {
	info, ok := r.byID[id]
	return info, ok
}

// Has reports whether the registry holds id.
func (r *Registry) Has(id ModuleID) bool {
	_, ok := r.byID[id]
	return ok
}

// IDs returns every module ID, sorted.
func (r *Registry) IDs() []ModuleID {
	return append([]ModuleID(nil), r.ids...)
}

// Namespace returns the sorted IDs of the modules directly in namespace ns: Namespace("lb") holds
// "lb.round_robin" but not "lb.hash.header".
func (r *Registry) Namespace(ns string) []ModuleID {
	var out []ModuleID
	for _, id := range r.ids {
		if id.Namespace() == ns {
			out = append(out, id)
		}
	}
	return out
}
