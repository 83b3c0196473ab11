package standalone

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/coxswain-labs/coxswain/controller/acme"
	"github.com/coxswain-labs/coxswain/controller/adminapi"
	"github.com/coxswain-labs/coxswain/controller/documents"
	"github.com/coxswain-labs/coxswain/controller/translator"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
	"github.com/coxswain-labs/coxswain/core/proxy"
)

// Engine is what the runner drives: the in-process proxy (*proxy.Proxy).
type Engine interface {
	// Apply swaps in a snapshot atomically, or rejects it whole and keeps the old one serving.
	// A listener it cannot bind does not reject it: Failed lists it until a retry binds it.
	Apply(ctx context.Context, snap *irv1.Snapshot) error
	Bound() []proxy.BoundListener
	Failed() []proxy.ListenerFailure
}

var _ Engine = (*proxy.Proxy)(nil)

// Options configure a Runner.
type Options struct {
	// Path is the manifest file or directory.
	Path string
	Log  *zap.Logger
	// Engine receives every snapshot; nil only for a runner used to validate.
	Engine Engine
	// Translate are the translation options; Translate.Now and Registry may be left unset.
	Translate translator.Options
	// Debounce is the watcher's quiet period; DefaultDebounce when zero.
	Debounce time.Duration
	// Documents, when set, fetch the remote documents resolvers ask for (a JwtAuth's JWKS), and a
	// changed one is translated and applied again; nil fetches none (`validate`), and a route
	// that needs one says so. Its OnChange is the runner's.
	Documents *documents.Options
	// DocumentWait bounds how long a reload waits for the first fetch of a document it asked for
	// before applying (2s when zero).
	DocumentWait time.Duration
	// UnresolvedFilters, when set, is coxswain_filter_unresolved_total{kind}: every translation
	// adds the ExtensionRefs it found naming an object that does not exist.
	UnresolvedFilters *prometheus.CounterVec
	// ACME, when set, runs the ACME client of automatic certificates in this process (the runner
	// sets its OnChange and Served): this process is both the ACME client and the proxy that
	// answers the challenges. nil: ACME listeners stay Pending.
	ACME *acme.Options
}

// NewUnresolvedFiltersCounter is the coxswain_filter_unresolved_total{kind} series, as the
// controller exports it, for Options.UnresolvedFilters.
func NewUnresolvedFiltersCounter() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "coxswain_filter_unresolved_total",
		Help: "ExtensionRefs naming a filter object that does not exist, added at every translation while they stay missing."}, []string{"kind"})
}

// Runner is standalone mode: load the manifests, translate them, apply the snapshot, and do it
// again whenever the files change. A reload that fails keeps the previous snapshot serving.
type Runner struct {
	opts Options
	log  *zap.Logger

	mu         sync.Mutex // serializes reloads
	lastDigest string     // files of the last applied reload
	lastReport *Report    // and its report
	lastLoad   *Result    // and its load, whose objects a broken document keeps

	state atomic.Pointer[State]
	ready chan struct{}
	once  sync.Once

	docs       *documents.Fetcher // nil without Options.Documents
	acme       *acme.Manager      // nil without Options.ACME
	docChanged chan struct{}      // a remote document or an ACME certificate or challenge changed

	// latest is the translation serving now (the admin API's routing and problems).
	latest adminapi.Latest
}

// Latest is the translation serving now; empty before the first apply.
func (r *Runner) Latest() *adminapi.Latest { return &r.latest }

// adminTranslation is tr as the admin API shows it, with the files objects came from.
func adminTranslation(res *Result, tr *translator.Result) *adminapi.Translation {
	return &adminapi.Translation{Store: res.Store, Result: tr, At: time.Now(), Source: func(kind, ns, name string) string {
		if src, ok := res.Sources[ObjectRef{Kind: kind, Namespace: ns, Name: name}]; ok {
			return src.String()
		}
		return ""
	}}
}

// State is what the runner knows after its latest reload.
type State struct {
	// Version is the snapshot version serving now ("" before the first successful apply).
	Version string
	// Report is the status of the latest reload, whether or not it could be applied.
	Report *Report
	// ApplyError says why the latest reload could not be applied; empty when it was.
	ApplyError string
	// Time is when the latest reload finished.
	Time time.Time

	snap *irv1.Snapshot // the snapshot serving now
}

// NewRunner returns a runner; it does nothing until Reload or Run.
func NewRunner(opts Options) *Runner {
	log := opts.Log
	if log == nil {
		log = zap.NewNop()
	}
	if opts.Translate.ControllerName == "" {
		opts.Translate.ControllerName = translator.DefaultControllerName
	}
	if opts.DocumentWait <= 0 {
		opts.DocumentWait = 2 * time.Second
	}
	r := &Runner{opts: opts, log: log, ready: make(chan struct{}), docChanged: make(chan struct{}, 1)}
	if opts.Documents != nil {
		dopts := *opts.Documents
		if dopts.Log == nil {
			dopts.Log = log.Named("documents")
		}
		dopts.OnChange = r.retranslate
		r.docs = documents.New(dopts)
		r.opts.Translate.Documents = r.docs
	}
	if opts.ACME != nil {
		aopts := *opts.ACME
		if aopts.Log == nil {
			aopts.Log = log.Named("acme")
		}
		if aopts.Registry == nil {
			aopts.Registry = opts.Translate.Registry
		}
		aopts.OnChange = r.retranslate
		aopts.Served = r.served
		r.acme = acme.New(aopts)
		r.opts.Translate.ACME = r.acme
	}
	r.state.Store(&State{})
	return r
}

// retranslate asks Run to translate the unchanged files again.
func (r *Runner) retranslate() {
	select {
	case r.docChanged <- struct{}{}:
	default: // a re-translation is pending already
	}
}

// served waits until the snapshot serving carries ch: the engine is in this process, so then
// its listeners answer it.
func (r *Runner) served(ctx context.Context, ch *irv1.ACMEChallenge) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for !acme.Carries(r.State().snap, ch) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// State returns the state after the latest reload. It never returns nil.
func (r *Runner) State() *State { return r.state.Load() }

// Ready is closed once the first snapshot has been applied.
func (r *Runner) Ready() <-chan struct{} { return r.ready }

// Run applies the manifests, then watches them and reloads on change until ctx is done. It fails
// if the first load cannot be applied, or if not one of its listeners could be bound (every port
// taken, say): a newcomer should see that at once rather than a process serving nothing. Once
// something serves, a listener that cannot be bound is logged and reported (/status), and
// retried, while the rest serves.
func (r *Runner) Run(ctx context.Context) error {
	if r.docs != nil {
		defer r.docs.Close()
	}
	if r.acme != nil {
		defer r.acme.Close()
	}
	if err := r.Reload(ctx); err != nil {
		return err
	}
	if u := r.Unbound(); len(u) > 0 && len(r.opts.Engine.Bound()) == 0 {
		return fmt.Errorf("no listener could be bound: %s at %s: %s", u[0].Listener, u[0].Address, u[0].Error)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-r.docChanged:
				// A remote document or an ACME certificate changed: the same files, translated again.
				_ = r.reload(ctx, true)
			}
		}
	})
	return Watch(ctx, r.log, r.opts.Path, r.opts.Debounce, func() {
		// Reload logs its own failures; the old snapshot keeps serving.
		_ = r.Reload(ctx)
	})
}

// Reload loads, translates and applies the manifests once. Unchanged files are a no-op. On any
// failure the snapshot serving before keeps serving, and the error is logged and returned.
func (r *Runner) Reload(ctx context.Context) error { return r.reload(ctx, false) }

// reload is Reload; force translates unchanged files again (a remote document changed).
func (r *Runner) reload(ctx context.Context, force bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	res, err := LoadOver(ctx, r.opts.Path, r.opts.Translate.Registry, r.lastLoad)
	if err != nil {
		if ctx.Err() != nil {
			return err // shutting down
		}
		r.log.Error("cannot read the manifests", zap.Error(err))
		r.setApplyError(err)
		return err
	}
	if res.Digest == r.lastDigest && !force {
		if st := r.State(); st.ApplyError != "" {
			// The files are back to what is serving: nothing to apply, nothing wrong any more.
			r.log.Info("manifests are back to the configuration serving", zap.String("version", st.Version))
			r.state.Store(&State{Version: st.Version, Report: r.lastReport, Time: time.Now(), snap: st.snap})
			return nil
		}
		r.log.Debug("manifests unchanged")
		return nil
	}
	tr, rep := r.translate(ctx, res)
	if r.opts.Engine == nil {
		r.latest.Store(adminTranslation(res, tr))
		r.state.Store(&State{Report: rep, Time: time.Now()})
		return nil
	}
	if err := r.apply(ctx, tr.Snapshot); err != nil {
		msg := "configuration rejected; the previous configuration keeps serving"
		if r.State().Version == "" {
			msg = "configuration rejected; nothing is serving"
		}
		r.log.Error(msg, zap.String("version", tr.Snapshot.GetVersion()), zap.Error(err))
		r.state.Store(&State{Version: r.State().Version, Report: rep, ApplyError: err.Error(), Time: time.Now(), snap: r.State().snap})
		return err
	}
	r.lastDigest, r.lastReport, r.lastLoad = res.Digest, rep, res
	r.latest.Store(adminTranslation(res, tr))
	prev := r.State().Version
	r.state.Store(&State{Version: tr.Snapshot.GetVersion(), Report: rep, Time: time.Now(), snap: tr.Snapshot})
	r.once.Do(func() { close(r.ready) })
	if r.acme != nil {
		r.acme.Sync(tr.ACME)
	}
	switch unchanged := prev == tr.Snapshot.GetVersion(); {
	case force && unchanged:
		r.log.Debug("a remote document or ACME certificate changed; the configuration did not", zap.String("version", prev))
	case force:
		r.log.Info("a remote document or ACME certificate changed; configuration applied", zap.String("version", tr.Snapshot.GetVersion()))
	default:
		r.logSummary(res, tr, rep, unchanged)
	}
	r.logUnbound()
	return nil
}

// apply hands the snapshot to the engine, turning a panic in a module into an error so a bad
// configuration can never take the process (and the table serving now) down.
func (r *Runner) apply(ctx context.Context, snap *irv1.Snapshot) (err error) {
	if snap == nil {
		return errors.New("translation produced no snapshot")
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("applying snapshot panicked: %v", p)
		}
	}()
	return r.opts.Engine.Apply(ctx, snap)
}

// translate runs the translator and logs every load error and problem with its file.
func (r *Runner) translate(ctx context.Context, res *Result) (*translator.Result, *Report) {
	for _, e := range res.Errors {
		r.log.Warn("manifest left out", loadErrorFields(e)...)
	}
	for _, k := range res.Kept {
		r.log.Warn("a broken manifest's last good version keeps serving", keptFields(k)...)
	}
	tr := translator.Translate(ctx, res.Store, r.opts.Translate)
	if r.docs != nil {
		if r.docs.AwaitFirst(ctx, r.opts.DocumentWait) {
			tr = translator.Translate(ctx, res.Store, r.opts.Translate)
		}
		r.docs.Sweep()
	}
	if r.opts.UnresolvedFilters != nil {
		for kind, n := range tr.UnresolvedFilters {
			r.opts.UnresolvedFilters.WithLabelValues(kind).Add(float64(n))
		}
	}
	rep := BuildReport(res, tr, r.opts.Translate.ControllerName)
	for _, p := range tr.Problems {
		ref := ObjectRef{Kind: p.Kind, Namespace: p.Namespace, Name: p.Name}
		src := res.Sources[ref]
		r.log.Warn("invalid configuration", zap.String("file", src.File), zap.Int("line", src.Line),
			zap.Int("document", src.Doc), zap.String("object", ref.String()), zap.String("field", p.Field),
			zap.String("reason", p.Reason), zap.String("message", p.Message))
	}
	for _, p := range tr.Warnings {
		ref := ObjectRef{Kind: p.Kind, Namespace: p.Namespace, Name: p.Name}
		src := res.Sources[ref]
		r.log.Warn("accepted with a warning", zap.String("file", src.File), zap.Int("line", src.Line),
			zap.Int("document", src.Doc), zap.String("object", ref.String()), zap.String("field", p.Field),
			zap.String("warning", p.Message))
	}
	for _, n := range rep.Notes {
		r.log.Warn(n)
	}
	return tr, rep
}

func (r *Runner) setApplyError(err error) {
	st := *r.State()
	st.ApplyError = err.Error()
	st.Time = time.Now()
	r.state.Store(&st)
}

func (r *Runner) logSummary(res *Result, tr *translator.Result, rep *Report, unchanged bool) {
	var listeners []string
	for _, b := range r.opts.Engine.Bound() {
		listeners = append(listeners, b.Protocol+" "+b.Address)
	}
	msg := "configuration applied"
	if unchanged {
		msg = "files changed, configuration did not; nothing to apply"
	}
	r.log.Info(msg,
		zap.String("version", tr.Snapshot.GetVersion()),
		zap.Strings("listeners", listeners),
		zap.Int("gateways", len(tr.Gateways)),
		zap.Int("routeObjects", tr.Routes.Len()),
		zap.Int("policies", len(tr.Policies)),
		zap.Int("routes", countRoutes(tr.Snapshot)),
		zap.Int("problems", len(rep.Problems)),
		zap.Int("documentsLeftOut", len(res.Errors)),
		zap.Int("files", len(res.Files)))
}

// loadErrorFields are the log fields of one load error.
func loadErrorFields(e *Error) []zap.Field {
	return []zap.Field{
		zap.String("file", e.Source.File), zap.Int("line", e.Source.Line), zap.Int("document", e.Source.Doc),
		zap.String("object", e.Object.String()), zap.String("field", e.Field),
		zap.String("reason", e.Reason), zap.String("message", e.Message),
	}
}

// countRoutes counts the IR routes (one per rule match per virtual host).
func countRoutes(s *irv1.Snapshot) int {
	n := 0
	for _, l := range s.GetListeners() {
		for _, srv := range l.GetServers() {
			for _, vh := range srv.GetVirtualHosts() {
				n += len(vh.GetRoutes())
			}
		}
	}
	return n
}
