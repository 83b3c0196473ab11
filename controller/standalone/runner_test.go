package standalone

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"go.uber.org/zap/zaptest"

	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy"
)

// recordingEngine records applied versions and fails on demand. The runner's control flow is what
// is under test here; the real proxy is exercised end to end in test/e2e.
type recordingEngine struct {
	mu      sync.Mutex
	applied []string
	fail    error
}

func (e *recordingEngine) Apply(_ context.Context, s *irv1.Snapshot) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.fail != nil {
		return e.fail
	}
	e.applied = append(e.applied, s.GetVersion())
	return nil
}

func (e *recordingEngine) Bound() []proxy.BoundListener { return nil }

func (e *recordingEngine) Failed() []proxy.ListenerFailure { return nil }

func (e *recordingEngine) count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.applied)
}

const classDoc = `apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: coxswain}
spec:
  controllerName: coxswain-labs.dev/gateway-controller
`

func TestRunnerReload(t *testing.T) {
	dir := writeFiles(t, map[string]string{"class.yaml": classDoc})
	eng := &recordingEngine{}
	r := NewRunner(Options{Path: dir, Log: zaptest.NewLogger(t), Engine: eng})
	ctx := context.Background()

	must(t, r.Reload(ctx))
	select {
	case <-r.Ready():
	default:
		t.Fatal("not ready after the first apply")
	}
	if eng.count() != 1 || r.State().Version == "" || r.State().Report == nil {
		t.Fatalf("first reload: applied %d, state %+v", eng.count(), r.State())
	}
	v1 := r.State().Version

	must(t, r.Reload(ctx))
	if eng.count() != 1 {
		t.Errorf("unchanged files were applied again")
	}

	// A rejected snapshot keeps the version serving and reports why.
	eng.fail = errors.New("port taken")
	must(t, os.WriteFile(filepath.Join(dir, "svc.yaml"), []byte("apiVersion: v1\nkind: Service\nmetadata: {name: s}\nspec: {ports: [{port: 80}]}\n"), 0o644))
	if err := r.Reload(ctx); err == nil {
		t.Fatal("reload should fail when the engine rejects the snapshot")
	}
	if st := r.State(); st.Version != v1 || !strings.Contains(st.ApplyError, "port taken") {
		t.Errorf("after a rejected apply: %+v", st)
	}

	// The same files are retried once the engine accepts them.
	eng.fail = nil
	must(t, r.Reload(ctx))
	if eng.count() != 2 || r.State().ApplyError != "" {
		t.Errorf("retry: applied %d, state %+v", eng.count(), r.State())
	}

	// Going back to the files serving clears the error without applying anything.
	eng.fail = errors.New("port taken")
	must(t, os.WriteFile(filepath.Join(dir, "svc2.yaml"), []byte("apiVersion: v1\nkind: Service\nmetadata: {name: s2}\nspec: {ports: [{port: 80}]}\n"), 0o644))
	if err := r.Reload(ctx); err == nil || r.State().ApplyError == "" {
		t.Fatal("reload should fail when the engine rejects the snapshot")
	}
	must(t, os.Remove(filepath.Join(dir, "svc2.yaml")))
	must(t, r.Reload(ctx))
	if st := r.State(); st.ApplyError != "" || st.Version != r.State().Version || st.Report == nil || eng.count() != 2 {
		t.Errorf("after reverting the files: %+v, applied %d", st, eng.count())
	}
	eng.fail = nil

	// A vanished path keeps the old configuration.
	must(t, os.RemoveAll(dir))
	if err := r.Reload(ctx); err == nil || r.State().Version == "" {
		t.Errorf("reload of a missing path: err %v, state %+v", err, r.State())
	}
}

func TestAdminHandler(t *testing.T) {
	dir := writeFiles(t, map[string]string{"class.yaml": classDoc, "bad.yaml": "kind: Nope\napiVersion: x/v1\nmetadata: {name: n}\n"})
	r := NewRunner(Options{Path: dir, Log: zaptest.NewLogger(t), Engine: &recordingEngine{}})
	srv := httptest.NewServer(AdminHandler(r, "test"))
	defer srv.Close()
	get := func(path string) (int, string) {
		resp, err := http.Get(srv.URL + path)
		must(t, err)
		defer func() { _ = resp.Body.Close() }()
		b, err := io.ReadAll(resp.Body)
		must(t, err)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Errorf("/healthz = %d", code)
	}
	if code, _ := get("/readyz"); code != 503 {
		t.Errorf("/readyz before the first apply = %d", code)
	}
	must(t, r.Reload(context.Background()))
	if code, body := get("/readyz"); code != 200 || !strings.Contains(body, r.State().Version) {
		t.Errorf("/readyz = %d %q", code, body)
	}
	code, body := get("/status")
	if code != 200 || !strings.Contains(body, `"reason": "UnknownKind"`) || !strings.Contains(body, "bad.yaml") {
		t.Errorf("/status = %d %s", code, body)
	}
}
