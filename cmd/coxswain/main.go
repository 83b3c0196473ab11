// Command coxswain is the stock Coxswain binary: a Kubernetes Gateway API implementation whose
// standalone mode (`coxswain serve -f DIR`) runs the translator and the proxy in one process from
// manifests on disk.
//
// The module list is modules/standard (the proxy halves); the controller halves, each module
// package's translate/ subpackage, are imported by zz_generated_translate.go, which `go generate`
// writes from that one list.
package main

//go:generate go run ./internal/gen -o zz_generated_translate.go

import (
	"github.com/coxswain-labs/coxswain/cmd/coxswaincmd"
	_ "github.com/coxswain-labs/coxswain/modules/standard" // the stock module set
)

func main() {
	coxswaincmd.Main()
}
