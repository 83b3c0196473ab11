package adminapi

import (
	"context"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/coxswain-labs/coxswain/core/admin"
)

// MaxEvents is the most Events /api/v1/events returns.
const MaxEvents = 500

// Event is one Kubernetes Event about one of our objects.
type Event struct {
	Object              ObjectRef `json:"object"`
	Type                string    `json:"type"`
	Reason              string    `json:"reason"`
	Message             string    `json:"message"`
	ReportingController string    `json:"reportingController,omitempty"`
	Count               int32     `json:"count"`
	FirstSeen           time.Time `json:"firstSeen"`
	LastSeen            time.Time `json:"lastSeen"`
}

// Events watches the Events about Coxswain's objects: those whose involved object is of an API
// group Coxswain serves (Gateway API, Coxswain's own), and those Coxswain itself reported. The
// list and watch drop every other Event before the informer stores it, so a cluster's unrelated
// Events never take the controller's memory; the API server's Event TTL bounds the rest.
type Events struct {
	inf cache.SharedIndexInformer
}

// NewEvents watches Events through kube; groups are the API groups whose objects count as ours,
// reporter the controller name Coxswain reports Events as.
func NewEvents(kube kubernetes.Interface, groups []string, reporter string) *Events {
	ours := func(e *corev1.Event) bool {
		if e.Source.Component == reporter || e.ReportingController == reporter {
			return true
		}
		group, _, _ := strings.Cut(e.InvolvedObject.APIVersion, "/")
		for _, g := range groups {
			if group == g && strings.Contains(e.InvolvedObject.APIVersion, "/") {
				return true
			}
		}
		return false
	}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			l, err := kube.CoreV1().Events("").List(ctx, o)
			if err != nil {
				return nil, err
			}
			kept := l.Items[:0]
			for _, e := range l.Items {
				if ours(&e) {
					kept = append(kept, e)
				}
			}
			l.Items = kept
			return l, nil
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			w, err := kube.CoreV1().Events("").Watch(ctx, o)
			if err != nil {
				return nil, err
			}
			return watch.Filter(w, func(ev watch.Event) (watch.Event, bool) {
				// A bookmark (an Event with only a resourceVersion, and the end of a watch-list's
				// initial events) must reach the reflector.
				e, ok := ev.Object.(*corev1.Event)
				return ev, ev.Type == watch.Bookmark || !ok || ours(e)
			}), nil
		},
	}
	return &Events{inf: cache.NewSharedIndexInformer(lw, &corev1.Event{}, 0, cache.Indexers{})}
}

// Run watches until ctx ends.
func (e *Events) Run(ctx context.Context) { e.inf.Run(ctx.Done()) }

// HasSynced says whether the first list is in.
func (e *Events) HasSynced() bool { return e.inf.HasSynced() }

// Recent returns at most limit Events, newest first.
func (e *Events) Recent(limit int) []Event {
	out := []Event{}
	for _, o := range e.inf.GetStore().List() {
		ev := o.(*corev1.Event)
		v := Event{Object: ObjectRef{Kind: ev.InvolvedObject.Kind, Namespace: ev.InvolvedObject.Namespace, Name: ev.InvolvedObject.Name,
			UID: string(ev.InvolvedObject.UID)}, Type: ev.Type, Reason: ev.Reason, Message: ev.Message,
			ReportingController: ev.ReportingController, Count: max(ev.Count, 1),
			FirstSeen: ev.FirstTimestamp.Time, LastSeen: ev.LastTimestamp.Time}
		if v.ReportingController == "" {
			v.ReportingController = ev.Source.Component
		}
		if v.FirstSeen.IsZero() {
			v.FirstSeen = ev.EventTime.Time
		}
		if v.LastSeen.IsZero() {
			v.LastSeen = v.FirstSeen
			if ev.Series != nil {
				v.LastSeen = ev.Series.LastObservedTime.Time
			}
		}
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].LastSeen.After(out[j].LastSeen) })
	return out[:min(len(out), limit)]
}

// Register adds GET /api/v1/events (?limit=N, at most MaxEvents).
func (e *Events) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/v1/events", func(w http.ResponseWriter, r *http.Request) {
		limit := MaxEvents
		if s := r.URL.Query().Get("limit"); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 {
				admin.WriteError(w, http.StatusBadRequest, "limit: a positive number is required")
				return
			}
			limit = min(n, MaxEvents)
		}
		admin.WriteJSON(w, struct {
			Events []Event `json:"events"`
		}{e.Recent(limit)})
	})
}
