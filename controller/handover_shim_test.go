package controller

import (
	"github.com/coxswain-labs/coxswain/controller/status"
	"github.com/coxswain-labs/coxswain/controller/translator"
)

// handOverStatus is what drive does with a translation's status (BenchmarkRouteChange); it
// returns the Result handed.
func handOverStatus(w *status.Writer, res, prev *translator.Result) *translator.Result {
	w.Desire(desired(res, prev, nil))
	return res
}
