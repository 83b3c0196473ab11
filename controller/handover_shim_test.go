package controller

import (
	"context"

	"github.com/coxswain-labs/coxswain/controller/status"
	"github.com/coxswain-labs/coxswain/controller/translator"
)

// handOverStatus is what drive does with a translation's status (BenchmarkRouteChange): the
// route statuses handed to the writer, then the Ingress side (status.loadBalancer); it returns
// the Result handed.
func handOverStatus(w *status.Writer, ing *ingressSide, store *translator.Store, res, prev *translator.Result) *translator.Result {
	w.Desire(desired(res, prev, nil))
	ing.after(context.Background(), store, res)
	return res
}
