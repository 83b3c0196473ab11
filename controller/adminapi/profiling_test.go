package adminapi

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestProfiling: the runtime's profiles are served under ProfilingPath, and only behind the
// admin API's authentication when it has one.
func TestProfiling(t *testing.T) {
	mux := http.NewServeMux()
	RegisterProfiling(mux)
	open := httptest.NewServer(mux)
	defer open.Close()
	guarded := httptest.NewServer(NewAuthorizer(nil).Wrap(mux))
	defer guarded.Close()

	get := func(base, path string) (int, []byte) {
		t.Helper()
		res, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		return res.StatusCode, b
	}
	code, body := get(open.URL, ProfilingPath+"heap?gc=1")
	if code != http.StatusOK || !bytes.HasPrefix(body, []byte{0x1f, 0x8b}) {
		t.Fatalf("heap profile: %d, %d bytes starting %x; want 200 and a gzipped profile", code, len(body), body[:min(len(body), 4)])
	}
	code, body = get(open.URL, ProfilingPath)
	if code != http.StatusOK || !strings.Contains(string(body), "goroutine") {
		t.Fatalf("index: %d %q", code, body)
	}
	code, body = get(open.URL, ProfilingPath+"cmdline")
	if code != http.StatusOK || len(body) == 0 {
		t.Fatalf("cmdline: %d %q", code, body)
	}
	if code, _ = get(open.URL, "/debug/pprof/heap"); code != http.StatusNotFound {
		t.Fatalf("/debug/pprof/heap answered %d: only %s may serve profiles", code, ProfilingPath)
	}
	if code, _ = get(guarded.URL, ProfilingPath+"heap"); code != http.StatusUnauthorized {
		t.Fatalf("heap profile without a token behind --admin-auth=kubernetes: %d, want 401", code)
	}
}
