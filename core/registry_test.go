package core

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// testModule is a module whose ID is chosen per test.
type testModule struct{ id ModuleID }

func (m testModule) CoxswainModule() ModuleInfo {
	return ModuleInfo{ID: m.id, New: func() Module { return testModule{id: m.id} }}
}

// noNew is a module that forgets its constructor.
type noNew struct{}

func (noNew) CoxswainModule() ModuleInfo { return ModuleInfo{ID: "test.no_new"} }

// withFreshRegistry runs the test against an empty global registry and restores the real one
// (with whatever init registered) afterwards. Tests using it must not run in parallel.
func withFreshRegistry(t *testing.T) {
	t.Helper()
	modulesMu.Lock()
	savedModules, savedFrozen := modules, frozen
	modules, frozen = map[ModuleID]ModuleInfo{}, nil
	modulesMu.Unlock()
	t.Cleanup(func() {
		modulesMu.Lock()
		modules, frozen = savedModules, savedFrozen
		modulesMu.Unlock()
	})
}

// panicMessage runs f and returns what it panicked with, or "" if it did not.
func panicMessage(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
		}
	}()
	f()
	return ""
}

func TestModuleIDParts(t *testing.T) {
	tests := []struct {
		id        ModuleID
		namespace string
		name      string
	}{
		{"filter.http.request_redirect", "filter.http", "request_redirect"},
		{"lb.round_robin", "lb", "round_robin"},
		{"filter.ext.example.com.Auth", "filter.ext.example.com", "Auth"},
		{"standalone", "", "standalone"},
	}
	for _, tt := range tests {
		t.Run(string(tt.id), func(t *testing.T) {
			if got := tt.id.Namespace(); got != tt.namespace {
				t.Errorf("Namespace() = %q, want %q", got, tt.namespace)
			}
			if got := tt.id.Name(); got != tt.name {
				t.Errorf("Name() = %q, want %q", got, tt.name)
			}
		})
	}
}

func TestRegisterModulePanics(t *testing.T) {
	tests := []struct {
		name  string
		setup []Module
		mod   Module
		want  string
	}{
		{"empty ID", nil, testModule{id: ""}, "empty module ID"},
		{"ID without namespace", nil, testModule{id: "lonely"}, "has no namespace"},
		{"ID with an empty label", nil, testModule{id: "filter..x"}, "empty label"},
		{"ID with a leading dot", nil, testModule{id: ".lb.x"}, "empty label"},
		{"ID with a trailing dot", nil, testModule{id: "lb.x."}, "empty label"},
		{"no New function", nil, noNew{}, "has no New function"},
		{"duplicate ID", []Module{testModule{id: "lb.dup"}}, testModule{id: "lb.dup"},
			"registered twice: by package github.com/coxswain-labs/coxswain/core and by package github.com/coxswain-labs/coxswain/core"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			withFreshRegistry(t)
			for _, m := range tt.setup {
				RegisterModule(m)
			}
			msg := panicMessage(func() { RegisterModule(tt.mod) })
			if !strings.Contains(msg, tt.want) {
				t.Errorf("RegisterModule panic = %q, want it to contain %q", msg, tt.want)
			}
		})
	}
}

func TestRegisterAfterFreezePanics(t *testing.T) {
	withFreshRegistry(t)
	RegisterModule(testModule{id: "lb.before"})
	reg := Freeze()
	msg := panicMessage(func() { RegisterModule(testModule{id: "lb.after"}) })
	if !strings.Contains(msg, "after the registry was frozen") {
		t.Errorf("panic = %q, want a registration-after-freeze panic", msg)
	}
	if reg.Has("lb.after") {
		t.Error("the frozen registry gained a module")
	}
	if Freeze() != reg {
		t.Error("a second Freeze returned a different registry")
	}
}

// TestFreezeSnapshots checks that Freeze copies: the registry it returns is not the map init
// writes to.
func TestFreezeSnapshots(t *testing.T) {
	withFreshRegistry(t)
	RegisterModule(testModule{id: "lb.a"})
	reg := Freeze()
	modulesMu.Lock()
	modules["lb.sneaky"] = testModule{id: "lb.sneaky"}.CoxswainModule()
	modulesMu.Unlock()
	if reg.Has("lb.sneaky") {
		t.Error("frozen registry shares the registration map")
	}
}

func TestRegistryLookup(t *testing.T) {
	withFreshRegistry(t)
	for _, id := range []ModuleID{"lb.round_robin", "route.http", "lb.least_conn", "lb.hash.header"} {
		RegisterModule(testModule{id: id})
	}
	reg := Freeze()

	info, ok := reg.Lookup("route.http")
	if !ok || info.ID != "route.http" {
		t.Fatalf("Lookup(route.http) = %v, %v", info, ok)
	}
	if m, ok := info.New().(testModule); !ok || m.id != "route.http" {
		t.Errorf("New() = %#v", info.New())
	}
	if _, ok := reg.Lookup("route.grpc"); ok {
		t.Error("Lookup found a module that was never registered")
	}
	if !reg.Has("lb.hash.header") || reg.Has("lb.hash") {
		t.Error("Has disagrees with what was registered")
	}
	wantIDs := []ModuleID{"lb.hash.header", "lb.least_conn", "lb.round_robin", "route.http"}
	if got := reg.IDs(); !reflect.DeepEqual(got, wantIDs) {
		t.Errorf("IDs() = %v, want %v", got, wantIDs)
	}
	ids := reg.IDs()
	ids[0] = "mutated"
	if reg.IDs()[0] == "mutated" {
		t.Error("IDs() returned the registry's own slice")
	}
}

func TestRegistryNamespace(t *testing.T) {
	reg := NewRegistry(
		testModule{id: "lb.round_robin"}, testModule{id: "lb.least_conn"}, testModule{id: "lb.hash.header"},
		testModule{id: "filter.http.cors"}, testModule{id: "filter.ext.example.com.Auth"},
	)
	tests := []struct {
		ns   string
		want []ModuleID
	}{
		{"lb", []ModuleID{"lb.least_conn", "lb.round_robin"}},
		{"lb.hash", []ModuleID{"lb.hash.header"}},
		{"filter.http", []ModuleID{"filter.http.cors"}},
		{"filter", nil},
		{"filter.ext.example.com", []ModuleID{"filter.ext.example.com.Auth"}},
		{"listener", nil},
	}
	for _, tt := range tests {
		t.Run(tt.ns, func(t *testing.T) {
			if got := reg.Namespace(tt.ns); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Namespace(%q) = %v, want %v", tt.ns, got, tt.want)
			}
		})
	}
}

// TestNewRegistryLeavesGlobalAlone checks that a test registry neither reads nor writes the
// global one.
func TestNewRegistryLeavesGlobalAlone(t *testing.T) {
	withFreshRegistry(t)
	reg := NewRegistry(testModule{id: "lb.only_here"})
	if !reg.Has("lb.only_here") {
		t.Fatal("NewRegistry lost its module")
	}
	if Freeze().Has("lb.only_here") {
		t.Error("NewRegistry leaked into the global registry")
	}
}
