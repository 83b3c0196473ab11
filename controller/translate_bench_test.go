package controller

import (
	"context"
	"fmt"
	"testing"

	"github.com/coxswain-labs/coxswain/controller/translator"
	"github.com/coxswain-labs/coxswain/controller/translator/translatortest"
	"github.com/coxswain-labs/coxswain/core"
	_ "github.com/coxswain-labs/coxswain/modules/httproute/translate"
	_ "github.com/coxswain-labs/coxswain/modules/standard"
)

// BenchmarkTranslate measures one full translation, which is what an EndpointSlice change costs
// (the controller has no separate endpoints path; see docs/controller.md).
func BenchmarkTranslate(b *testing.B) {
	reg := core.Freeze()
	for _, n := range []int{1000, 5000} {
		b.Run(fmt.Sprintf("routes=%d", n), func(b *testing.B) {
			store := translatortest.SyntheticStore(n)
			res := translator.Translate(context.Background(), store, translator.Options{Registry: reg})
			if len(res.Routes) != n || len(res.Snapshot.GetListeners()) != 1 {
				b.Fatalf("translation of the synthetic store is off: %d route statuses, %d listeners, problems %v",
					len(res.Routes), len(res.Snapshot.GetListeners()), res.Problems)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				translator.Translate(context.Background(), store, translator.Options{Registry: reg})
			}
		})
	}
}
