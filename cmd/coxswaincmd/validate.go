package coxswaincmd

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"go.uber.org/zap"
	"sigs.k8s.io/yaml"

	"github.com/coxswain-labs/coxswain/cmd/proxycmd"
	"github.com/coxswain-labs/coxswain/controller/standalone"
)

// validate prints the status the manifests would get (what the controller would write) and every
// problem, and exits 1 if anything is wrong.
func validate(args []string, e *proxycmd.Env) int {
	fs := proxycmd.NewFlagSet("validate", "-f PATH [flags]", e)
	var cf configFlags
	cf.register(fs)
	var ing ingressFlags
	ing.register(fs)
	var mf migrateFlags
	mf.register(fs.StringVar)
	output := fs.String("o", "yaml", "output format: yaml or json (the report), or gateway-api: the Gateway, HTTPRoutes and filter objects that express the Ingresses")
	if code, ok := proxycmd.Parse(fs, args); !ok {
		return code
	}
	if !cf.check(fs) {
		return 2
	}
	if err := ing.check(); err != nil {
		fmt.Fprintf(e.Stderr, "coxswain validate: %v\n", err)
		return 2
	}
	switch *output {
	case "yaml", "json":
	case "gateway-api":
		return printGatewayAPI(e, cf.path, ing, mf)
	default:
		fmt.Fprintf(e.Stderr, "coxswain validate: -o must be yaml, json or gateway-api, not %q\n", *output)
		return 2
	}
	opts := cf.translateOptions()
	opts.KindSettings = ing.settings()
	opts.Registry = e.Reg
	runner := standalone.NewRunner(standalone.Options{Path: cf.path, Log: zap.NewNop(), Translate: opts})
	if err := runner.Reload(context.Background()); err != nil {
		fmt.Fprintf(e.Stderr, "coxswain validate: %v\n", err)
		return 1
	}
	rep := runner.State().Report
	if err := writeReport(e, rep, *output); err != nil {
		fmt.Fprintf(e.Stderr, "coxswain validate: %v\n", err)
		return 1
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(e.Stderr, "note: %s\n", n)
	}
	for _, w := range rep.Warnings {
		fmt.Fprintf(e.Stderr, "warning: %s: %s: %s%s\n", w.Source, w.Object, fieldPrefix(w.Field), w.Message)
	}
	if rep.HasErrors() {
		fmt.Fprintf(e.Stderr, "invalid: %d document(s) left out, %d problem(s), %d False condition(s)\n",
			len(rep.LoadErrors), len(rep.Problems), len(rep.Failures))
		for _, le := range rep.LoadErrors {
			fmt.Fprintf(e.Stderr, "  %v\n", le)
		}
		for _, p := range rep.Problems {
			fmt.Fprintf(e.Stderr, "  %s: %s: %s%s (%s)\n", p.Source, p.Object, fieldPrefix(p.Field), p.Message, p.Reason)
		}
		for _, f := range rep.Failures {
			fmt.Fprintf(e.Stderr, "  %s\n", f)
		}
		return 1
	}
	fmt.Fprintf(e.Stderr, "valid: %d GatewayClass(es), %d Gateway(s)%s; snapshot version %s\n",
		len(rep.GatewayClasses), len(rep.Gateways), routeCounts(slices.Concat(rep.Routes, rep.Policies)), rep.Version)
	return 0
}

// routeCounts is ", 3 HTTPRoute(s), 1 TCPRoute(s)": the objects (routes, policies) of each kind,
// by kind.
func routeCounts(routes []standalone.ObjectStatus) string {
	n := map[string]int{}
	for _, r := range routes {
		n[r.Kind]++
	}
	var out strings.Builder
	for _, k := range slices.Sorted(maps.Keys(n)) {
		fmt.Fprintf(&out, ", %d %s(s)", n[k], k)
	}
	return out.String()
}

func fieldPrefix(f string) string {
	if f == "" {
		return ""
	}
	return f + ": "
}

func writeReport(e *proxycmd.Env, rep *standalone.Report, format string) error {
	var out []byte
	var err error
	if format == "json" {
		out, err = json.MarshalIndent(rep, "", "  ")
		out = append(out, '\n')
	} else {
		out, err = yaml.Marshal(rep)
	}
	if err != nil {
		return fmt.Errorf("encoding the report: %w", err)
	}
	_, err = e.Stdout.Write(out)
	return err
}
