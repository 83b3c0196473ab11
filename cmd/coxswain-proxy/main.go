// Command coxswain-proxy is the stock proxy-only distribution: the stock module set's proxy
// halves and the `proxy`, `list-modules` and `version` commands. Its dependency closure holds no
// Kubernetes package (main_test.go checks); `serve` and `validate` need the translator, which is
// built on the Gateway API Go types, so they are only in the full coxswain binary.
package main

import (
	"github.com/coxswain-labs/coxswain/cmd/proxycmd"
	_ "github.com/coxswain-labs/coxswain/modules/standard" // the stock module set (proxy halves)
)

func main() {
	proxycmd.Main()
}
