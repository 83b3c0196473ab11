package proxycmd

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Set by the Makefile: -ldflags "-X github.com/coxswain-labs/coxswain/cmd/proxycmd.version=...".
var (
	version = ""
	commit  = ""
)

// BuildVersion returns the version and commit, from -ldflags or else from the build info that
// `go install module@version` records.
func BuildVersion() (v, c string) {
	v, c = version, commit
	if info, ok := debug.ReadBuildInfo(); ok {
		if v == "" && info.Main.Version != "" {
			v = info.Main.Version
		}
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && c == "" {
				c = s.Value
			}
		}
	}
	if v == "" {
		v = "(devel)"
	}
	if c == "" {
		c = "unknown"
	}
	return v, c
}

// PrintVersion is `coxswain version`.
func PrintVersion(args []string, e *Env) int {
	fs := NewFlagSet("version", "", e)
	if code, ok := Parse(fs, args); !ok {
		return code
	}
	v, c := BuildVersion()
	fmt.Fprintf(e.Stdout, "coxswain %s (commit %s, %s, %s/%s)\n", v, c, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return 0
}
