// Command gen writes cmd/coxswain's zz_generated_translate.go: a blank import of the controller
// half (P/translate) of every package P in modules/standard.Packages that has one. The stock
// distribution keeps one list, modules/standard; this file follows from it. Run it with
// `go generate ./cmd/coxswain`; TestGeneratedTranslateImports fails when the file is stale.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/coxswain-labs/coxswain/cmd/coxswain/internal/gen/translateimports"
)

func main() {
	out := flag.String("o", "zz_generated_translate.go", "file to write")
	flag.Parse()
	src, err := translateimports.Generate(context.Background(), ".")
	if err == nil {
		err = os.WriteFile(*out, src, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}
