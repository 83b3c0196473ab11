package core

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

var (
	errProvision = errors.New("provision failed on purpose")
	errValidate  = errors.New("validate failed on purpose")
	errCleanup   = errors.New("cleanup failed on purpose")
)

// journal records lifecycle calls across module instances.
type journal struct {
	mu     sync.Mutex
	events []string
}

func (j *journal) add(e string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.events = append(j.events, e)
}

func (j *journal) get() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return append([]string(nil), j.events...)
}

// lifecycleModule records Provision, Validate and Cleanup, and fails any of them on request.
type lifecycleModule struct {
	Name          string `json:"name"`
	FailProvision bool   `json:"failProvision,omitempty"`
	FailValidate  bool   `json:"failValidate,omitempty"`
	FailCleanup   bool   `json:"failCleanup,omitempty"`

	id  ModuleID
	log *journal
}

var (
	_ Provisioner  = (*lifecycleModule)(nil)
	_ Validator    = (*lifecycleModule)(nil)
	_ CleanerUpper = (*lifecycleModule)(nil)
)

func (m *lifecycleModule) CoxswainModule() ModuleInfo {
	id, log := m.id, m.log
	return ModuleInfo{ID: id, New: func() Module { return &lifecycleModule{id: id, log: log} }}
}

func (m *lifecycleModule) Provision(bc *BuildContext) error {
	m.log.add(m.Name + ":provision")
	bc.Log.Info("provisioning")
	if m.FailProvision {
		return errProvision
	}
	return nil
}

func (m *lifecycleModule) Validate() error {
	m.log.add(m.Name + ":validate")
	if m.FailValidate {
		return errValidate
	}
	return nil
}

func (m *lifecycleModule) Cleanup() error {
	m.log.add(m.Name + ":cleanup")
	if m.FailCleanup {
		return errCleanup
	}
	return nil
}

// plainModule has no lifecycle methods at all.
type plainModule struct {
	Value int `json:"value"`
}

func (*plainModule) CoxswainModule() ModuleInfo {
	return ModuleInfo{ID: "test.plain", New: func() Module { return new(plainModule) }}
}

const lifecycleID ModuleID = "test.lifecycle"

func newTestBuild(t *testing.T) (*BuildContext, *journal, *observer.ObservedLogs) {
	t.Helper()
	j := &journal{}
	obs, logs := observer.New(zap.InfoLevel)
	reg := NewRegistry(&lifecycleModule{id: lifecycleID, log: j}, (*plainModule)(nil))
	bc := NewBuildContext(context.Background(), zap.New(obs).Named("proxy"), reg, &irv1.Snapshot{})
	return bc, j, logs
}

func config(id ModuleID, json string) *irv1.ModuleConfig {
	return &irv1.ModuleConfig{Id: string(id), Json: []byte(json)}
}

func TestLoadLifecycle(t *testing.T) {
	bc, j, logs := newTestBuild(t)
	logger := bc.Log

	a, err := Load[*lifecycleModule](bc, config(lifecycleID, `{"name":"a"}`))
	if err != nil {
		t.Fatalf("Load a: %v", err)
	}
	if a.Name != "a" {
		t.Errorf("decoded name = %q", a.Name)
	}
	if _, err := Load[*lifecycleModule](bc, config(lifecycleID, `{"name":"b"}`)); err != nil {
		t.Fatalf("Load b: %v", err)
	}
	if got, want := j.get(), []string{"a:provision", "a:validate", "b:provision", "b:validate"}; !reflect.DeepEqual(got, want) {
		t.Errorf("events = %v, want %v", got, want)
	}
	if bc.Log != logger {
		t.Error("Load did not restore bc.Log")
	}
	entries := logs.All()
	if len(entries) != 2 || entries[0].LoggerName != "proxy."+string(lifecycleID) {
		t.Errorf("Provision logged as %v, want logger proxy.%s", entries, lifecycleID)
	}

	if err := bc.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if got, want := j.get()[4:], []string{"b:cleanup", "a:cleanup"}; !reflect.DeepEqual(got, want) {
		t.Errorf("cleanup order = %v, want newest first %v", got, want)
	}
	if err := bc.Close(); err != nil || len(j.get()) != 6 {
		t.Errorf("second Close cleaned again: %v, events %v", err, j.get())
	}
}

func TestLoadFailures(t *testing.T) {
	tests := []struct {
		name    string
		mc      *irv1.ModuleConfig
		wantErr string
		wantIs  error
		events  []string
		// closeEvents are the events Close adds afterwards.
		closeEvents []string
		// asBalancer loads the module as an interface it does not implement.
		asBalancer bool
	}{
		{"nil config", nil, "without an ID", nil, nil, nil, false},
		{"empty ID", config("", `{}`), "without an ID", nil, nil, nil, false},
		{"missing module", config("test.absent", `{}`), "not in this build", nil, nil, nil, false},
		{"unknown field", config(lifecycleID, `{"name":"a","colour":"red"}`), "unknown field", nil, nil, nil, false},
		{"wrong field type", config(lifecycleID, `{"name":7}`), "decoding config", nil, nil, nil, false},
		{"trailing data", config(lifecycleID, `{"name":"a"} {"name":"b"}`), "unexpected data", nil, nil, nil, false},
		{"provision fails: cleaned up at once", config(lifecycleID, `{"name":"a","failProvision":true}`),
			"provision", errProvision, []string{"a:provision", "a:cleanup"}, nil, false},
		{"validate fails: cleaned up at once", config(lifecycleID, `{"name":"a","failValidate":true}`),
			"invalid config", errValidate, []string{"a:provision", "a:validate", "a:cleanup"}, nil, false},
		{"wrong interface: cleaned up by Close", config(lifecycleID, `{"name":"a"}`),
			"does not implement", nil, []string{"a:provision", "a:validate"}, []string{"a:cleanup"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bc, j, _ := newTestBuild(t)
			var err error
			if tt.asBalancer {
				_, err = Load[Balancer](bc, tt.mc)
			} else {
				_, err = Load[*lifecycleModule](bc, tt.mc)
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Load error = %v, want it to contain %q", err, tt.wantErr)
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("error %v does not wrap %v", err, tt.wantIs)
			}
			if got := j.get(); !slices.Equal(got, tt.events) {
				t.Errorf("events = %v, want %v", got, tt.events)
			}
			if err := bc.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if got := j.get()[len(tt.events):]; !slices.Equal(got, tt.closeEvents) {
				t.Errorf("Close events = %v, want %v", got, tt.closeEvents)
			}
		})
	}
}

func TestLoadMissingModuleError(t *testing.T) {
	bc, _, _ := newTestBuild(t)
	_, err := Load[Module](bc, config("route.quic", ""))
	var missing *MissingModuleError
	if !errors.As(err, &missing) || missing.ID != "route.quic" {
		t.Fatalf("error = %v, want a *MissingModuleError for route.quic", err)
	}
}

func TestLoadEmptyConfig(t *testing.T) {
	bc, _, _ := newTestBuild(t)
	for _, js := range []string{"", "  \n", "{}", "null"} {
		m, err := Load[*plainModule](bc, config("test.plain", js))
		if err != nil {
			t.Errorf("Load(%q): %v", js, err)
			continue
		}
		if m.Value != 0 {
			t.Errorf("Load(%q) value = %d, want zero", js, m.Value)
		}
	}
}

func TestCloseJoinsCleanupErrors(t *testing.T) {
	bc, _, _ := newTestBuild(t)
	for _, js := range []string{`{"name":"a","failCleanup":true}`, `{"name":"b"}`, `{"name":"c","failCleanup":true}`} {
		if _, err := Load[*lifecycleModule](bc, config(lifecycleID, js)); err != nil {
			t.Fatal(err)
		}
	}
	err := bc.Close()
	if !errors.Is(err, errCleanup) {
		t.Fatalf("Close error = %v, want it to wrap the cleanup error", err)
	}
	if n := strings.Count(err.Error(), errCleanup.Error()); n != 2 {
		t.Errorf("Close joined %d cleanup errors, want 2: %v", n, err)
	}
}

func TestNewBuildContextDefaultsLogger(t *testing.T) {
	bc := NewBuildContext(context.Background(), nil, NewRegistry(), nil)
	if bc.Log == nil {
		t.Fatal("nil logger was not replaced")
	}
	bc.Log.Info("does not panic")
}

func TestDecodeStrict(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		wantErr string
	}{
		{"empty", "", ""},
		{"whitespace", " \t\n", ""},
		{"known fields", `{"value":3}`, ""},
		{"unknown field", `{"value":3,"other":1}`, "unknown field"},
		{"two values", `{"value":3}{"value":4}`, "unexpected data"},
		{"trailing garbage", `{"value":3} x`, "unexpected data"},
		{"not JSON", `value=3`, "invalid character"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var m plainModule
			err := DecodeStrict([]byte(tt.in), &m)
			if tt.wantErr == "" && err != nil {
				t.Errorf("DecodeStrict: %v", err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("DecodeStrict error = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestMustConfig(t *testing.T) {
	if mc := MustConfig("test.plain", nil); mc.GetId() != "test.plain" || len(mc.GetJson()) != 0 {
		t.Errorf("MustConfig(nil) = %v", mc)
	}
	if mc := MustConfig("test.plain", plainModule{Value: 5}); string(mc.GetJson()) != `{"value":5}` {
		t.Errorf("MustConfig JSON = %s", mc.GetJson())
	}
	msg := panicMessage(func() { MustConfig("test.plain", make(chan int)) })
	if !strings.Contains(msg, "core.MustConfig(test.plain)") {
		t.Errorf("panic = %q, want a MustConfig panic naming the module", msg)
	}
}
