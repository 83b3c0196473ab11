package controller

import (
	"context"
	"fmt"
	"runtime"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/controller/translator"
	"github.com/coxswain-labs/coxswain/controller/translator/translatortest"
	"github.com/coxswain-labs/coxswain/core"
	_ "github.com/coxswain-labs/coxswain/modules/httproute/translate"
	_ "github.com/coxswain-labs/coxswain/modules/standard"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

// BenchmarkTranslate measures one full translation, which is what an EndpointSlice change costs
// (the controller has no separate endpoints path; see docs/controller.md).
func BenchmarkTranslate(b *testing.B) {
	reg := core.Freeze()
	for _, n := range []int{1000, 5000} {
		b.Run(fmt.Sprintf("routes=%d", n), func(b *testing.B) {
			store := translatortest.SyntheticStore(n)
			res := translator.Translate(context.Background(), store, translator.Options{Registry: reg})
			if res.Routes.Len() != n || len(res.Snapshot.GetListeners()) != 1 {
				b.Fatalf("translation of the synthetic store is off: %d route statuses, %d listeners, problems %v",
					res.Routes.Len(), len(res.Snapshot.GetListeners()), res.Problems)
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu := cpuTime()
			for b.Loop() {
				translator.Translate(context.Background(), store, translator.Options{Registry: reg})
			}
			reportCPU(b, cpu)
		})
	}
}

// translateRouteChange replaces route i mod n of store's HTTPRoutes by a new version (a new
// resourceVersion and generation), translates incrementally with the change as the informers
// report it (translator.Changes), and fails b unless the translation used the change, built two
// pieces, as one route change does, and kept all n routes.
func translateRouteChange(b *testing.B, inc *translator.Incremental, store *translator.Store, opts translator.Options, i int) *translator.Result {
	routes := store.Objects[translatortest.HTTPRoute]
	n := len(routes)
	r := routes[i%n].(*gwapiv1.HTTPRoute).DeepCopy()
	r.ResourceVersion = fmt.Sprint(i)
	r.Generation++
	routes[i%n] = r
	ch := &translator.Changes{Since: store, Routes: map[schema.GroupKind]map[types.NamespacedName]translation.Object{
		translatortest.HTTPRoute: {{Namespace: r.Namespace, Name: r.Name}: r}}}
	res := inc.TranslateChanges(context.Background(), store, opts, ch)
	if inc.Built() != 2 || res.Routes.Len() != n || (i > 1 && !inc.UsedChanges()) {
		b.Fatalf("built %d, reused %d, %d routes, used the changes %t", inc.Built(), inc.Reused(), res.Routes.Len(), inc.UsedChanges())
	}
	return res
}

// BenchmarkTranslateIncremental measures what a route change costs the controller's
// translator: one HTTPRoute of n replaced by a new version, then an incremental translation
// (every other route's Build is replayed).
func BenchmarkTranslateIncremental(b *testing.B) {
	reg := core.Freeze()
	for _, n := range []int{1000, 5000, 20000} {
		b.Run(fmt.Sprintf("routes=%d", n), func(b *testing.B) {
			store := translatortest.SyntheticStore(n)
			inc := translator.NewIncremental()
			opts := translator.Options{Registry: reg}
			inc.Translate(context.Background(), store, opts)
			b.ReportAllocs()
			b.ResetTimer()
			cpu := cpuTime()
			i := 0
			for b.Loop() {
				i++
				translateRouteChange(b, inc, store, opts, i)
			}
			reportCPU(b, cpu)
			// What the records, carried states and kept virtual hosts hold after b.N changes:
			// memory a change leaves behind shows here, not in B/op.
			b.StopTimer()
			runtime.GC()
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			b.ReportMetric(float64(ms.HeapAlloc)/(1<<20), "live-MB")
			runtime.KeepAlive(inc)
		})
	}
}

// cpuTime is the CPU time this process used so far. On the shared 2-core machine wall time
// per op mostly measures the other tenants; CPU time per op is what the translation costs.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func reportCPU(b *testing.B, since time.Duration) {
	b.ReportMetric(float64(cpuTime()-since)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
}
