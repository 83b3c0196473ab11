package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Set by the Makefile: -ldflags "-X main.version=... -X main.commit=...".
var (
	version = ""
	commit  = ""
)

// buildVersion returns the version and commit, from -ldflags or else from the build info that
// `go install module@version` records.
func buildVersion() (v, c string) {
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

func printVersion(args []string, e *env) int {
	fs := newFlagSet("version", "", e)
	if code, ok := parse(fs, args); !ok {
		return code
	}
	v, c := buildVersion()
	fmt.Fprintf(e.stdout, "coxswain %s (commit %s, %s, %s/%s)\n", v, c, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return 0
}
