package controller

import (
	"context"
	"fmt"
	"testing"

	"go.uber.org/zap"

	"github.com/coxswain-labs/coxswain/controller/status"
	"github.com/coxswain-labs/coxswain/controller/translator"
	"github.com/coxswain-labs/coxswain/controller/translator/translatortest"
	"github.com/coxswain-labs/coxswain/core"
)

// BenchmarkRouteChange measures what the driver does for a route change between listing the
// caches and publishing: one HTTPRoute of n replaced by a new version, the incremental
// translation, and the hand-over of its status to the writer (desired + Writer.Desire) and to the
// Ingress side (ingressSide.after, with an address to write as the benchmark's controller has):
// the `prepared` share of the controller's `published` line, but for events and ACME. The
// writer does not run: its queue only collects keys.
func BenchmarkRouteChange(b *testing.B) {
	reg := core.Freeze()
	for _, n := range []int{1000, 5000, 20000} {
		b.Run(fmt.Sprintf("routes=%d", n), func(b *testing.B) {
			store := translatortest.SyntheticStore(n)
			inc := translator.NewIncremental()
			opts := translator.Options{Registry: reg}
			w := status.NewWriter(status.Options{Log: zap.NewNop()})
			ing := &ingressSide{log: zap.NewNop(), lb: ingressLoadBalancer(nil, "127.0.0.1:8080")}
			res := inc.Translate(context.Background(), store, opts)
			handed := handOverStatus(w, ing, store, res, nil)
			b.ReportAllocs()
			b.ResetTimer()
			cpu := cpuTime()
			i := 0
			for b.Loop() {
				i++
				handed = handOverStatus(w, ing, store, translateRouteChange(b, inc, store, opts, i), handed)
			}
			reportCPU(b, cpu)
		})
	}
}
