package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestAccessLogQuickstart serves examples/quickstart as a newcomer does (the access log is on by
// default) and finds the access log line of one real request on standard output, with its fields;
// then scrapes /metrics for the request's series.
func TestAccessLogQuickstart(t *testing.T) {
	port := freePort(t)
	files := exampleFiles(t, "quickstart", map[string]int{
		"port: 8080": port, "port: 8443": freePort(t),
		"port: 9001": startBackend(t, "app").port, "port: 9002": startBackend(t, "canary").port, "port: 9003": startBackend(t, "other").port,
	})
	s := startServe(t, files)
	var res *result
	eventually(t, 10*time.Second, "/app/hello served", func() error {
		var err error
		res, err = do(context.Background(), http.DefaultClient, request{
			url: fmt.Sprintf("http://127.0.0.1:%d/app/hello?secret=1", port), headers: map[string]string{"X-Request-Id": "e2e-42"}})
		if err != nil {
			return err
		}
		if res.code != 200 {
			return fmt.Errorf("status %d", res.code)
		}
		return nil
	})
	var line map[string]any
	eventually(t, 10*time.Second, "the request's access log line", func() error {
		sc := bufio.NewScanner(strings.NewReader(s.log.String()))
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil && m["msg"] == "request" && m["request_id"] == "e2e-42" {
				line = m
				return nil
			}
		}
		return fmt.Errorf("no access log line with request_id e2e-42")
	})
	for k, v := range map[string]any{"method": "GET", "path": "/app/hello", "status": float64(200), "client_ip": "127.0.0.1",
		"gateway": "default/quickstart", "host": fmt.Sprintf("127.0.0.1:%d", port), "protocol": "HTTP/1.1", "rule": "app"} {
		if line[k] != v {
			t.Errorf("%s = %v, want %v (line %v)", k, line[k], v, line)
		}
	}
	for _, k := range []string{"time", "listener", "route", "backend", "upstream", "duration", "upstream_duration", "bytes_out"} {
		if _, ok := line[k]; !ok {
			t.Errorf("no %s in %v", k, line)
		}
	}
	if _, ok := line["query"]; ok {
		t.Errorf("the query was logged without --access-log-query: %v", line)
	}
	body, code, err := s.adminGet("/metrics")
	if err != nil || code != 200 {
		t.Fatalf("/metrics: %d %v", code, err)
	}
	if !strings.Contains(body, `coxswain_proxy_requests_total{backend="default/app-v1:80",code_class="2xx",gateway="default/quickstart"`) {
		t.Errorf("no requests_total series for the request in:\n%s", grepLines(body, "coxswain_proxy_requests_total"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for l := range strings.Lines(s) {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "")
}
