package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// loadReport is the part of /status a bad reload shows: the documents left out, each with its
// file and line, and the objects whose last good version keeps serving.
type loadReport struct {
	Version string `json:"version"`
	Report  struct {
		LoadErrors []struct {
			Source struct {
				File string `json:"file"`
				Line int    `json:"line"`
			} `json:"source"`
			Object struct {
				Name string `json:"name"`
			} `json:"object"`
			Field   string `json:"field"`
			Reason  string `json:"reason"`
			Message string `json:"message"`
		} `json:"loadErrors"`
		Kept []struct {
			Object struct {
				Name string `json:"name"`
			} `json:"object"`
		} `json:"kept"`
	} `json:"report"`
}

func (s *server) loadReport() (loadReport, error) {
	body, code, err := s.adminGet("/status")
	if err != nil || code != http.StatusOK {
		return loadReport{}, fmt.Errorf("/status: %d %v", code, err)
	}
	var r loadReport
	return r, json.Unmarshal([]byte(body), &r)
}

// TestBadReloadsKeepLastGood makes a series of bad reloads of a running `coxswain serve`: after
// each one the routes it broke keep serving their last good version (checked by requests, not by
// the status alone), the error names the file and the line, and a good change after it is still
// applied.
func TestBadReloadsKeepLastGood(t *testing.T) {
	b1, b2 := startBackend(t, "b1"), startBackend(t, "b2")
	port := freePort(t)
	route := func(name, path, backend string) string {
		return routeYAML(name, "", fmt.Sprintf(`  rules:
  - matches: [{path: {type: PathPrefix, value: %s}}]
    backendRefs: [{name: %s, port: 80}]
`, path, backend))
	}
	goodA, goodB := route("a", "/a", "b1"), route("b", "/b", "b2")
	s := startServe(t, map[string]string{
		"gateway.yaml":  gatewayClassYAML + "---\n" + gatewayYAML(listener{name: "http", protocol: "HTTP", port: port}),
		"backends.yaml": servicesYAML(b1, b2),
		"a.yaml":        goodA,
		"b.yaml":        goodB,
	})
	ctx := context.Background()
	c := &http.Client{Timeout: 5 * time.Second}
	get := func(path string) string {
		res, err := do(ctx, c, request{url: fmt.Sprintf("http://127.0.0.1:%d%s", port, path)})
		if err != nil {
			return err.Error()
		}
		if res.code != http.StatusOK {
			return fmt.Sprintf("status %d", res.code)
		}
		return res.backendOf()
	}
	// serving asserts by request that each path is served by its backend.
	serving := func(t *testing.T, want map[string]string) {
		t.Helper()
		for path, be := range want {
			if got := get(path); got != be {
				t.Errorf("GET %s: %s, want %s", path, got, be)
			}
		}
	}
	lastGood := map[string]string{"/a": "b1", "/b": "b2"}
	serving(t, lastGood)
	goodVersion := s.status().Version

	// A line of the route documents above (routeYAML: apiVersion, kind, metadata, spec,
	// parentRefs, rules, matches, backendRefs).
	const backendRefsLine = 8
	tests := []struct {
		name, file, content string
		reason, field       string
		line                int // 0: any line, as long as there is one
		kept                string
	}{
		{name: "truncated YAML", file: "a.yaml", content: goodA[:strings.Index(goodA, "port: 80")+5],
			reason: "InvalidYAML", kept: "a"},
		{name: "wrong type", file: "a.yaml", content: strings.Replace(goodA, "port: 80", "port: eighty", 1),
			reason: "InvalidValue", field: "spec.rules[0].backendRefs[0].port", line: backendRefsLine, kept: "a"},
		{name: "unknown field", file: "b.yaml", content: strings.Replace(goodB, "backendRefs", "backendRefz", 1),
			reason: "UnknownField", field: "spec.rules[0].backendRefz", line: backendRefsLine, kept: "b"},
		{name: "binary garbage", file: "b.yaml", content: "\x00\x01\xff garbage",
			reason: "InvalidYAML", line: 1, kept: "b"},
		{name: "10 MB document", file: "a.yaml", content: goodA + "  hostnames: [\"" + strings.Repeat("x", 10<<20) + "\"]\n",
			reason: "TooLarge", kept: "a"},
		// A second definition of route a, in a file sorted after a.yaml, pointing elsewhere: the
		// first definition keeps serving.
		{name: "duplicate object", file: "c.yaml", content: route("a", "/a", "b2"),
			reason: "Duplicate", line: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s.write(tc.file, tc.content)
			var got loadReport
			eventually(t, 20*time.Second, "the bad reload reported", func() error {
				r, err := s.loadReport()
				if err != nil {
					return err
				}
				for _, le := range r.Report.LoadErrors {
					if filepath.Base(le.Source.File) == tc.file && le.Reason == tc.reason {
						got = r
						return nil
					}
				}
				return fmt.Errorf("load errors %+v", r.Report.LoadErrors)
			})
			for _, le := range got.Report.LoadErrors {
				if filepath.Base(le.Source.File) != tc.file {
					t.Errorf("a load error for another file: %+v", le)
					continue
				}
				if le.Source.Line == 0 || (tc.line != 0 && le.Source.Line != tc.line) {
					t.Errorf("%s: line %d, want %d (any line if 0 but one)", tc.name, le.Source.Line, tc.line)
				}
				if le.Field != tc.field {
					t.Errorf("%s: field %q, want %q", tc.name, le.Field, tc.field)
				}
				// The log says the same: file and line.
				s.awaitLog("the error logged with its file and line", "manifest left out", tc.file,
					fmt.Sprintf(`"line":%d`, le.Source.Line), tc.reason)
			}
			if tc.kept != "" && (len(got.Report.Kept) != 1 || got.Report.Kept[0].Object.Name != tc.kept) {
				t.Errorf("kept %+v, want route %s", got.Report.Kept, tc.kept)
			}
			if got.Version != goodVersion {
				t.Errorf("version %s after a bad reload, want the last good %s", got.Version, goodVersion)
			}
			serving(t, lastGood)

			// Repaired, the file loads again and nothing is left out.
			if tc.file == "c.yaml" {
				s.write(tc.file, route("c", "/c", "b2"))
			} else {
				s.write(tc.file, map[string]string{"a.yaml": goodA, "b.yaml": goodB}[tc.file])
			}
			eventually(t, 20*time.Second, "the repaired file loaded", func() error {
				r, err := s.loadReport()
				if err != nil {
					return err
				}
				if len(r.Report.LoadErrors) != 0 || len(r.Report.Kept) != 0 {
					return fmt.Errorf("load errors %+v, kept %+v", r.Report.LoadErrors, r.Report.Kept)
				}
				if tc.file == "c.yaml" && get("/c") != "b2" {
					return errNotYet
				}
				return nil
			})
			serving(t, lastGood)
			goodVersion = s.status().Version
		})
	}

	// After all that, a good change still reaches the traffic.
	s.write("a.yaml", route("a", "/a", "b2"))
	eventually(t, 20*time.Second, "a good change after the bad ones", func() error {
		if got := get("/a"); got != "b2" {
			return fmt.Errorf("GET /a: %s", got)
		}
		return nil
	})
	serving(t, map[string]string{"/b": "b2", "/c": "b2"})
}
