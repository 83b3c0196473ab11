package kubelet

import (
	"fmt"
	"net/url"
	"testing"
	"time"
)

func TestLogs(t *testing.T) {
	b := newLogBuffer()
	out, errs := b.stream("stdout"), b.stream("stderr")
	t0 := time.Now()
	fmt.Fprint(out, "one\ntw")
	fmt.Fprint(errs, "err\n")
	fmt.Fprint(out, "o\nthree\n")
	t1 := time.Now()
	b.mu.Lock()
	b.lines[0].at = t0.Add(-time.Hour) // "one" is old
	b.mu.Unlock()

	tests := []struct {
		name  string
		query string
		want  string
	}{
		{"everything", "", "one\nerr\ntwo\nthree\n"},
		{"since", "sinceTime=" + url.QueryEscape(t0.Add(-time.Minute).UTC().Format(time.RFC3339)), "err\ntwo\nthree\n"},
		{"tail", "tailLines=2", "two\nthree\n"},
		{"limit", "limitBytes=5", "one\ne"},
		{"nothing since later", "sinceTime=" + url.QueryEscape(t1.Add(time.Hour).UTC().Format(time.RFC3339)), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, _ := url.ParseQuery(tc.query)
			q, err := parseLogQuery(v.Get, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if got := string(b.render(q)); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
	q, _ := parseLogQuery(url.Values{"timestamps": {"true"}, "tailLines": {"1"}}.Get, time.Now())
	got := string(b.render(q))
	ts, line, ok := cutSpace(got)
	if _, err := time.Parse(time.RFC3339Nano, ts); !ok || err != nil || line != "three\n" {
		t.Errorf("timestamped line %q (%v)", got, err)
	}
	if _, err := parseLogQuery(url.Values{"sinceTime": {"yesterday"}}.Get, time.Now()); err == nil {
		t.Error("a bad sinceTime parsed")
	}
}

func cutSpace(s string) (string, string, bool) {
	for i := range len(s) {
		if s[i] == ' ' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}
