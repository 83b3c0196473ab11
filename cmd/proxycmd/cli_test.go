package proxycmd

import (
	"bytes"
	"strings"
	"testing"

	"github.com/coxswain-labs/coxswain/core"
	_ "github.com/coxswain-labs/coxswain/modules/standard" // modules to list
)

func runWith(args ...string) (stdout, stderr string, code int) {
	var out, errb bytes.Buffer
	code = Run(args, &Env{Reg: core.Freeze(), Stdout: &out, Stderr: &errb})
	return out.String(), errb.String(), code
}

func TestRun(t *testing.T) {
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout string // substring
		stderr string // substring
	}{
		{name: "no command", args: nil, code: 2, stderr: "proxy-only build"},
		{name: "help", args: []string{"help"}, code: 0, stdout: "list-modules"},
		{name: "serve is not here", args: []string{"serve", "-f", "x"}, code: 2, stderr: `"serve" is not in a proxy-only build`},
		{name: "unknown command", args: []string{"nope"}, code: 2, stderr: `unknown command "nope"`},
		{name: "list-modules", args: []string{"list-modules"}, code: 0, stdout: "route.http\n"},
		{name: "list-modules --packages", args: []string{"list-modules", "--packages"}, code: 0,
			stdout: "route.http github.com/coxswain-labs/coxswain/modules/httproute\n"},
		{name: "version", args: []string{"version"}, code: 0, stdout: "coxswain "},
		{name: "proxy needs a discovery address", args: []string{"proxy"}, code: 2, stderr: "--discovery-address is required"},
		{name: "proxy rejects a bad log level", args: []string{"proxy", "--discovery-address", "127.0.0.1:1", "--log-level", "loud"},
			code: 2, stderr: "--log-level"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, code := runWith(tc.args...)
			if code != tc.code || !strings.Contains(out, tc.stdout) || !strings.Contains(errOut, tc.stderr) {
				t.Errorf("exit %d (want %d)\nstdout:\n%s\nstderr:\n%s", code, tc.code, out, errOut)
			}
		})
	}
}

func TestModuleSettingFlag(t *testing.T) {
	var m ModuleSettings
	for _, v := range []string{"ratelimit.redis.address=127.0.0.1:6379", "a.b=x=y"} {
		if err := m.Set(v); err != nil {
			t.Fatalf("Set(%q): %v", v, err)
		}
	}
	if m["ratelimit.redis.address"] != "127.0.0.1:6379" || m["a.b"] != "x=y" {
		t.Errorf("settings %v", m)
	}
	for _, bad := range []string{"novalue", "=x", "a.b=again"} {
		if err := m.Set(bad); err == nil {
			t.Errorf("Set(%q): no error", bad)
		}
	}
	if got := m.String(); got != "a.b=x=y ratelimit.redis.address=127.0.0.1:6379" {
		t.Errorf("String() = %q", got)
	}
}
