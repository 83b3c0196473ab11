package controller

import (
	"context"
	"crypto/rand"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	gwapiv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/coxswain-labs/coxswain/controller/acme"
	"github.com/coxswain-labs/coxswain/controller/adminapi"
	"github.com/coxswain-labs/coxswain/controller/documents"
	"github.com/coxswain-labs/coxswain/controller/status"
	"github.com/coxswain-labs/coxswain/controller/translator"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/modules/translation"
)

// After a failed publish the driver tries again after publishRetry, doubling up to
// maxPublishRetry while failures continue.
const (
	publishRetry    = time.Second
	maxPublishRetry = 30 * time.Second
)

// Controller watches the cluster and, while it leads, translates, publishes and writes status.
type Controller struct {
	opts    Options
	log     *zap.Logger
	watch   *watch
	owned   *ownedWatch // nil without Options.Provisioning
	trigger *coalescer
	dirty   atomic.Uint32 // change bits since the last translation
	// routeKeys are the keys of the routes changed since the last translation (storepatch.go).
	routeKeys changeLog
	// firstChange is when the oldest change not yet translated arrived (unix nanos; 0: none).
	firstChange atomic.Int64
	// features are those the compiled-in modules serve; a GatewayClass claims the ones of them the
	// cluster's Gateway API CRDs serve too (claimed).
	features []gwapiv1.SupportedFeature
	docs     *documents.Fetcher // remote documents for resolvers; fetches only while leading
	// randomKey is the session key when Options.SessionKey gives none.
	randomKey []byte

	writer atomic.Pointer[status.Writer] // set while leading
	// latest is the newest translation while leading (the admin API's routing and problems).
	latest adminapi.Latest
	// manifests are the objects provisioning applied, by Gateway (/api/v1/manifests).
	manifests *manifests
	// leader is the identity of the Lease holder last observed.
	leader atomic.Pointer[string]
	synced atomic.Bool
	stats  Stats
}

// Stats are counters for tests, benchmarks and metrics.
type Stats struct {
	Leading      atomic.Bool
	Translations atomic.Int64 // translations (full or incremental, not endpoints-only)
	// ReplayedBuilds and Builds count the route Build calls translations replayed from the
	// previous one and ran (translator.Incremental).
	ReplayedBuilds, Builds atomic.Int64
	// ChangesUsed counts the translations that were given what changed by key and used it
	// (translator.Changes, storepatch.go).
	ChangesUsed atomic.Int64
	// EndpointRefreshes counts endpoints-only updates (no route translated).
	EndpointRefreshes atomic.Int64
	TranslateNanos    atomic.Int64 // duration of the latest translation
	Publishes         atomic.Int64
	PublishedAt       atomic.Int64 // unix nanos of the latest successful publish
	PublishFailures   atomic.Int64
	// UnresolvedFilters is coxswain_filter_unresolved_total{kind}: every full translation adds
	// the ExtensionRefs it found naming an object that does not exist, so the series grows for
	// as long as one stays missing (a fail-open filter's rule is being served unfiltered).
	UnresolvedFilters *prometheus.CounterVec
	// TranslateDuration is coxswain_controller_translation_duration_seconds{kind}: each
	// translation, kind "full", "incremental" (translator.Incremental replayed the builds of
	// unchanged routes) or "endpoints" (the endpoints-only refresh).
	TranslateDuration *prometheus.HistogramVec
	// ChangeLag is coxswain_controller_change_to_publish_seconds, the informer lag: from the
	// first informer event (or document, or retry) a snapshot includes to its publication. It
	// is the holdoff, the translation and the publish; a lag that grows is a controller that
	// cannot keep up with the API server's changes.
	ChangeLag prometheus.Histogram
}

// New builds a controller; Run starts it.
func New(opts Options) (*Controller, error) {
	if err := opts.setDefaults(); err != nil {
		return nil, fmt.Errorf("controller options: %w", err)
	}
	c := &Controller{
		opts:      opts,
		log:       opts.Log,
		manifests: newManifests(),
		trigger:   newCoalescer(opts.Holdoff, opts.MaxDelay),
		features:  supportedFeatures(opts),
		randomKey: make([]byte, 32),
	}
	_, _ = rand.Read(c.randomKey) // crypto/rand.Read never fails

	dopts := opts.Documents
	if dopts.Log == nil {
		dopts.Log = opts.Log.Named("documents")
	}
	dopts.OnChange = func() { c.changed(changeConfig) }
	c.docs = documents.New(dopts)
	c.stats.UnresolvedFilters = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "coxswain_filter_unresolved_total",
		Help: "ExtensionRefs naming a filter object that does not exist, added at every translation while they stay missing."}, []string{"kind"})
	c.stats.TranslateDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "coxswain_controller_translation_duration_seconds",
		Help:    "Duration of each translation, by kind: full, incremental (unchanged routes' builds replayed), or endpoints (an endpoints-only refresh).",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)}, []string{"kind"})
	c.stats.ChangeLag = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "coxswain_controller_change_to_publish_seconds",
		Help:    "Informer lag: from the first change a snapshot includes (an informer event, a fetched document, a publish retry) to its publication.",
		Buckets: prometheus.ExponentialBuckets(0.01, 2, 12)})
	return c, nil
}

// Synced reports whether the informer caches have been filled once.
func (c *Controller) Synced() bool { return c.synced.Load() }

// Latest is the newest translation of the current leadership term; empty on a standby.
func (c *Controller) Latest() *adminapi.Latest { return &c.latest }

// Manifests returns the objects provisioning last applied for the Gateway with uid, as the
// provisioner rendered them; empty when it provisions nothing for it (or provisioning is off).
func (c *Controller) Manifests(uid types.UID) []map[string]any { return c.manifests.Of(uid) }

// Provisions says whether this controller provisions objects for Gateways.
func (c *Controller) Provisions() bool { return c.opts.Provisioning != nil }

// Identity is this replica's Lease identity.
func (c *Controller) Identity() string { return c.opts.LeaderElection.Identity }

// LeaderIdentity is the identity of the leader last observed, "" before one is.
func (c *Controller) LeaderIdentity() string {
	if c.opts.LeaderElection.Disabled {
		return c.opts.LeaderElection.Identity
	}
	if p := c.leader.Load(); p != nil {
		return *p
	}
	return ""
}

// Stats returns the controller's live counters.
func (c *Controller) Stats() *Stats { return &c.stats }

// StatusWrites counts the status updates of the current leadership term; 0 when not leading.
func (c *Controller) StatusWrites() int64 {
	if w := c.writer.Load(); w != nil {
		return w.Writes()
	}
	return 0
}

func (c *Controller) changed(ch change) {
	c.firstChange.CompareAndSwap(0, time.Now().UnixNano())
	c.dirty.Or(uint32(ch))
	c.trigger.Notify()
}

func (c *Controller) touched(k status.Key) {
	if w := c.writer.Load(); w != nil {
		w.Touch(k)
	}
}

// Run watches until ctx is done, leading whenever it holds the Lease. It returns nil on a clean
// shutdown, after the leadership term's publisher is closed and the Lease released.
func (c *Controller) Run(ctx context.Context) error {
	if err := c.checkGatewayAPI(); err != nil {
		return err
	}
	var err error
	c.watch, err = newWatch(c.opts.Kube, c.opts.Gateway, c.opts.REST, c.opts.Registry, events{changed: c.changed, touched: c.touched, route: c.routeKeys.add})
	if err != nil {
		return err
	}
	if c.opts.Provisioning != nil {
		if c.owned, err = newOwnedWatch(c.opts.Kube, c.opts.Provisioning, events{changed: c.changed, touched: c.touched}); err != nil {
			return err
		}
		c.watch.extraFactories = append(c.watch.extraFactories, c.owned.factory, c.owned.podFactory)
		c.watch.informers = append(c.watch.informers, c.owned.informers...)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		c.watch.shutdown()
		c.docs.Close()
	}()
	c.log.Info("starting", zap.String("controllerName", c.opts.ControllerName), zap.Int("supportedFeatures", len(c.features)))
	if !c.watch.start(ctx, c.log) {
		// WaitForCacheSync gives up only when ctx ends: a shutdown before the caches synced is
		// still a clean stop, as it is at any later point.
		return nil
	}
	c.features = c.watch.servedFeatures(c.features)
	c.synced.Store(true)
	c.log.Info("caches synced", zap.Strings("watching", c.watch.watchedKinds()))
	if c.opts.LeaderElection.Disabled {
		c.lead(ctx)
		return nil
	}
	return c.campaign(ctx)
}

// lead is one leadership term: a status writer and a publisher, and translations until ctx ends.
func (c *Controller) lead(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c.log.Info("leading")
	c.stats.Leading.Store(true)
	defer c.stats.Leading.Store(false)

	w := status.NewWriter(status.Options{
		Log: c.log.Named("status"), Client: c.opts.Gateway,
		ControllerName: gwapiv1.GatewayController(c.opts.ControllerName),
		Addresses:      c.writerAddresses(),
		GatewayClasses: c.watch.classes, Gateways: c.watch.gateways, Routes: c.watch.routeStatus(), Policies: c.watch.policyStatus(),
		ListenerSets: c.watch.listenerSetStatus(c.opts.Gateway),
		Workers:      c.opts.StatusWorkers, ErrorAnswers: errorAnswersOf(c.opts.Registry),
	})
	var wg sync.WaitGroup
	wg.Go(func() { w.Run(ctx) })
	c.writer.Store(w)
	events := newProblemEvents(c.opts.Kube, c.opts.ControllerName, c.log.Named("events"))
	defer func() {
		c.latest.Store(nil)
		events.shutdown()
		c.writer.Store(nil)
		cancel()
		wg.Wait()
	}()

	pub := c.startPublisher(ctx, w)
	if pub == nil {
		return
	}
	mgr := c.startACME(pub)
	if mgr != nil {
		defer mgr.Close()
	}
	defer func() {
		closeCtx, done := context.WithTimeout(context.WithoutCancel(ctx), c.opts.ShutdownTimeout)
		defer done()
		if err := pub.Close(closeCtx); err != nil {
			c.log.Warn("closing the publisher", zap.Error(err))
		}
	}()
	c.drive(ctx, pub, w, events, mgr)
}

func (c *Controller) startPublisher(ctx context.Context, report Reporter) Publisher {
	for {
		pub, err := c.opts.NewPublisher(ctx, report)
		if err == nil {
			return pub
		}
		c.log.Error("starting the publisher", zap.Error(err))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(publishRetry):
		}
	}
}

// drive translates every settled burst of changes, hands the status to the writer and the
// snapshot, when its version changed, to the publisher. A burst of EndpointSlice changes only
// takes the endpoints fast path: the clusters of the last snapshot get fresh endpoints, and no
// route is translated again (status cannot change either: it never depends on endpoints).
func (c *Controller) drive(ctx context.Context, pub Publisher, w *status.Writer, events *problemEvents, mgr *acme.Manager) {
	c.changed(changeConfig) // a new term starts from a full translation
	opts := translator.Options{ControllerName: c.opts.ControllerName, Registry: c.opts.Registry, Documents: c.docs,
		SessionKey: c.sessionKey(), KindSettings: c.opts.KindSettings}
	if mgr != nil {
		opts.ACME = mgr
	}
	var pool *addressPool
	if c.opts.AddressPool.IsValid() {
		pool = newAddressPool(c.opts.AddressPool)
		opts.AssignsAddresses = true
	}
	prov := c.newProvisioner()
	var provRetry *time.Timer // one pending retry of a failed provisioning at a time
	retryProvision := func() {
		if provRetry != nil {
			provRetry.Stop()
		}
		provRetry = time.AfterFunc(publishRetry, func() { c.changed(changeConfig) })
	}
	defer func() {
		if provRetry != nil {
			provRetry.Stop()
		}
	}()
	var lastRes *translator.Result
	var handed *translator.Result // the latest Result whose status the writer took
	// inc reuses the route builds of the previous translation while the rest of the world
	// stays the same (translator.Incremental): a route change translates that route only.
	inc := translator.NewIncremental()
	ingressService := c.opts.IngressStatusService
	if len(c.opts.StatusAddresses) > 0 {
		ingressService = types.NamespacedName{} // --status-address wins, as ingress-nginx's publish-status-address does
	}
	ing := newIngressSide(c.opts.Kube, c.log.Named("ingress"), ingressLoadBalancer(statusAddressValues(c.opts.StatusAddresses), c.opts.KindSettings[ingressHTTPAddressSetting]),
		ingressService)
	defer ing.stop()
	// store is the latest Store, translated the Store of the latest translation, and pending
	// the routes changed since then by key (translator.Changes), when known says every Store
	// since was patched.
	var store, translated *translator.Store
	pending := map[schema.GroupKind]map[types.NamespacedName]translation.Object{}
	known := false
	var last *irv1.Snapshot    // the latest snapshot made, published or not
	var warned map[string]bool // the warnings logged, so that each is logged once while it lasts
	var published string
	retry := publishRetry
	unpublished := 0 // translations since the latest publish (their snapshots changed nothing)
	for c.trigger.Wait(ctx) == nil {
		woke := time.Now()
		changedAt := c.firstChange.Swap(0)
		ch := change(c.dirty.Swap(0))
		next, routes, patched, err := c.watch.nextStore(store, ch, c.routeKeys.take())
		if err != nil {
			c.log.Error("reading the caches", zap.Error(err))
			store, known = nil, false // the next one is listed afresh
			continue
		}
		store = next
		known = known && patched // listed afresh: what changed since the translation is not known
		for gk, objs := range routes {
			if pending[gk] == nil {
				pending[gk] = map[types.NamespacedName]translation.Object{}
			}
			maps.Copy(pending[gk], objs)
		}
		start := time.Now()
		kind := "full"
		var took time.Duration // the translation or refresh alone
		var split []zap.Field  // where the translation's wall time went (threadtime.go)
		if ch == changeEndpoints && last != nil {
			kind = "endpoints"
			last = inc.RefreshEndpoints(ctx, last, store, opts)
			took = time.Since(start)
			c.stats.EndpointRefreshes.Add(1)
			if lastRes != nil {
				refreshed := *lastRes
				refreshed.Snapshot = last
				c.latest.Store(&adminapi.Translation{Store: store, Result: &refreshed, At: time.Now()})
			}
		} else {
			if pool != nil {
				opts.GatewayAddresses = pool.assign(store.Gateways, c.ourClasses(store))
			}
			if prov != nil {
				opts.Provisioned = c.provision(ctx, prov, store, retryProvision)
			}
			claimed := c.claimed()
			opts.Routability = reportsRoutability(claimed)
			opts.StatusAddresses = c.opts.StatusAddresses
			var changes *translator.Changes
			if known && translated != nil {
				changes = &translator.Changes{Since: translated, Routes: pending}
			}
			ws := startWallSplit()
			res := inc.TranslateChanges(ctx, store, opts, changes)
			split = ws.finish()
			translated, pending, known = store, map[schema.GroupKind]map[types.NamespacedName]translation.Object{}, true
			c.stats.Translations.Add(1)
			if c.docs.AwaitFirst(ctx, c.opts.DocumentWait) {
				// A document asked for was not fetched yet: publish what it is now, not its absence.
				res = inc.TranslateChanges(ctx, store, opts, &translator.Changes{Since: store})
				c.stats.Translations.Add(1)
				split = nil // two translations: the split is the first's only
			}
			took = time.Since(start)
			c.stats.ReplayedBuilds.Add(int64(inc.Reused()))
			c.stats.Builds.Add(int64(inc.Built()))
			if inc.UsedChanges() {
				c.stats.ChangesUsed.Add(1)
			}
			if inc.Reused() > 0 {
				kind = "incremental" // some routes' builds were replayed, not run
			}
			c.docs.Sweep()
			w.Desire(desired(res, handed, claimed))
			handed = res
			last, lastRes = res.Snapshot, res
			c.latest.Store(&adminapi.Translation{Store: store, Result: res, At: time.Now()})
			events.record(store, res)
			if len(res.Problems) > 0 {
				c.log.Debug("translation problems", zap.Int("count", len(res.Problems)))
			}
			for kind, n := range res.UnresolvedFilters {
				c.stats.UnresolvedFilters.WithLabelValues(kind).Add(float64(n))
			}
			warned = logWarnings(c.log, res.Warnings, warned)
			ing.after(ctx, store, res)
			if mgr != nil {
				mgr.Sync(res.ACME)
			}
		}
		c.stats.TranslateNanos.Store(int64(time.Since(start)))
		c.stats.TranslateDuration.WithLabelValues(kind).Observe(time.Since(start).Seconds())
		c.log.Debug("translated", zap.String("kind", kind), zap.Int("replayedBuilds", inc.Reused()), zap.Int("builds", inc.Built()),
			zap.Duration("took", time.Since(start)),
			zap.String("version", last.GetVersion()))
		unpublished++
		if last.GetVersion() == published {
			continue
		}
		publishing := time.Now()
		if err := pub.Publish(ctx, last); err != nil {
			if ctx.Err() != nil {
				return
			}
			c.stats.PublishFailures.Add(1)
			c.log.Error("publishing a snapshot", zap.String("version", last.GetVersion()), zap.Duration("retryIn", retry), zap.Error(err))
			time.AfterFunc(retry, func() { c.changed(changeConfig) })
			retry = min(2*retry, maxPublishRetry)
			continue
		}
		retry = publishRetry
		published = last.GetVersion()
		c.stats.Publishes.Add(1)
		c.stats.PublishedAt.Store(time.Now().UnixNano())
		// Where the time from the change to the publication went: the coalescer's wait (from
		// the first change this snapshot includes), listing the caches, the translation, what
		// the driver did next (statuses handed to the writer, events, ACME) and the publish
		// (the in-process proxy's table build, or handing the snapshot to discovery).
		fields := []zap.Field{zap.String("version", published), zap.Int("gateways", len(last.GetGateways())), zap.String("kind", kind),
			zap.Int("translations", unpublished), zap.Duration("listed", start.Sub(woke)), zap.Duration("translated", took),
			zap.Duration("prepared", publishing.Sub(start)-took), zap.Bool("changesUsed", inc.UsedChanges()), zap.Duration("applied", time.Since(publishing))}
		fields = append(fields, split...)
		unpublished = 0
		if changedAt != 0 {
			lag := time.Since(time.Unix(0, changedAt))
			c.stats.ChangeLag.Observe(lag.Seconds())
			fields = append(fields, zap.Duration("changeLag", lag), zap.Duration("waited", woke.Sub(time.Unix(0, changedAt))))
		}
		c.log.Info("published", fields...)
	}
}

// desired is the status part of a translation, as the writer takes it, with the features every
// GatewayClass of ours claims. The route statuses are those that changed since prev, the
// Result the writer took last, when res can tell (translator.Result.RouteStatusChanges); all of
// them otherwise.
func desired(res, prev *translator.Result, claimed []gwapiv1.SupportedFeature) status.Desired {
	classes := make(map[types.NamespacedName]*gwapiv1.GatewayClassStatus, len(res.GatewayClasses))
	for nn, st := range res.GatewayClasses {
		cp := *st
		cp.SupportedFeatures = claimed
		classes[nn] = &cp
	}
	policies := make(map[status.Key]*gwapiv1.PolicyStatus, len(res.Policies))
	for k, st := range res.Policies {
		policies[status.Key{Kind: status.Kind(k.Kind), NamespacedName: types.NamespacedName{Namespace: k.Namespace, Name: k.Name}}] = st
	}
	d := status.Desired{GatewayClasses: classes, Gateways: res.Gateways, Policies: policies, ListenerSets: res.ListenerSets}
	routeKey := func(k translator.RouteKey) status.Key {
		return status.Key{Kind: status.Kind(k.Kind), NamespacedName: types.NamespacedName{Namespace: k.Namespace, Name: k.Name}}
	}
	if keys, ok := res.RouteStatusChanges(prev); ok {
		d.RouteChanges = make(map[status.Key]*gwapiv1.RouteStatus, len(keys))
		for _, k := range keys {
			d.RouteChanges[routeKey(k)] = res.Routes.Get(k) // nil: it left
		}
		return d
	}
	d.Routes = make(map[status.Key]*gwapiv1.RouteStatus, res.Routes.Len())
	for k, st := range res.Routes.All() {
		d.Routes[routeKey(k)] = st
	}
	return d
}

// checkGatewayAPI fails when the API server does not serve the Gateway API kinds the core reads.
// Module kinds (route kinds, ExtensionRef resources) not served yet are watched for instead.
func (c *Controller) checkGatewayAPI() error {
	gv := gwapiv1.GroupVersion.String()
	res, err := c.opts.Kube.Discovery().ServerResourcesForGroupVersion(gv)
	if err != nil {
		return fmt.Errorf("discovering %s (are the Gateway API CRDs installed?): %w", gv, err)
	}
	served := map[string]bool{}
	for _, r := range res.APIResources {
		served[r.Name] = true
	}
	for _, need := range []string{"gatewayclasses", "gateways"} {
		if !served[need] {
			return fmt.Errorf("%s is not served in %s: install the Gateway API CRDs", need, gv)
		}
	}
	return nil
}

// sessionKey is the translator's SessionKey for this leadership term: Options.SessionKey's, else
// the random one this process made at start.
func (c *Controller) sessionKey() []byte {
	if c.opts.SessionKey != nil {
		if k := c.opts.SessionKey(); len(k) > 0 {
			return k
		}
	}
	return c.randomKey
}

// ourClasses are the names of the GatewayClasses this controller answers to.
func (c *Controller) ourClasses(store *translator.Store) map[string]bool {
	out := map[string]bool{}
	for _, gc := range store.GatewayClasses {
		if string(gc.Spec.ControllerName) == c.opts.ControllerName {
			out[gc.Name] = true
		}
	}
	return out
}

// logWarnings logs each translation warning once while it lasts (a translation runs on every
// change, and an unchanged warning must not fill the log); it returns the set now current.
func logWarnings(log *zap.Logger, ws []*translator.Problem, before map[string]bool) map[string]bool {
	now := make(map[string]bool, len(ws))
	for _, w := range ws {
		msg := w.Error()
		now[msg] = true
		if !before[msg] {
			log.Warn("accepted with a warning", zap.String("object", w.Kind+" "+w.Namespace+"/"+w.Name),
				zap.String("field", w.Field), zap.String("warning", w.Message))
		}
	}
	return now
}
