package acme

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/mholt/acmez/v3"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/coxswain-labs/coxswain/controller/translator"
	"github.com/coxswain-labs/coxswain/core"
	irv1 "github.com/coxswain-labs/coxswain/core/ir/v1"
)

// Options configure a Manager.
type Options struct {
	// Storage keeps accounts, certificates, keys and locks (certmagic.FileStorage, SecretStorage).
	Storage certmagic.Storage
	Log     *zap.Logger
	// OnChange is called (from any goroutine, never under a lock of the Manager) when what the
	// translator reads changed: a certificate obtained or renewed, an attempt failed, a challenge
	// added or removed. The process translates again.
	OnChange func()
	// Served blocks until the proxies answer ch (a snapshot carrying it is applied everywhere),
	// or ctx ends. nil: the challenge is taken as served at once.
	Served func(ctx context.Context, ch *irv1.ACMEChallenge) error
	// ServeTimeout bounds Served (30s when zero).
	ServeTimeout time.Duration
	// OnError hears of every failed attempt (the controller records an Event); may be nil.
	OnError func(hostname, directory string, err error)
	// Registry holds the DNS provider modules (acme.dns.*); core.Freeze() when nil.
	Registry *core.Registry
	// RenewCheckInterval is how often certificates are checked for renewal (certmagic's 10m
	// when zero); RenewalWindowRatio the part of a lifetime left when renewal starts (1/3).
	RenewCheckInterval time.Duration
	RenewalWindowRatio float64
}

// Manager obtains and renews the certificates of ACME listeners. It implements
// translator.ACMESource.
type Manager struct {
	opts   Options
	log    *zap.Logger
	ctx    context.Context
	cancel context.CancelFunc

	mu         sync.Mutex
	issuers    map[string]*managed // by translator.ACMEIssuer.Key
	states     map[string]translator.ACMEState
	challenges map[string]*irv1.ACMEChallenge
	closed     bool
}

// managed is one issuer's certmagic config and the names it manages.
type managed struct {
	iss   *issuer
	cfg   *certmagic.Config
	cache *certmagic.Cache
	names map[string]bool
}

var _ translator.ACMESource = (*Manager)(nil)

// New returns a Manager; it does nothing until Sync.
func New(opts Options) *Manager {
	if opts.Log == nil {
		opts.Log = zap.NewNop()
	}
	if opts.ServeTimeout <= 0 {
		opts.ServeTimeout = 30 * time.Second
	}
	if opts.Registry == nil {
		opts.Registry = core.Freeze()
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Manager{opts: opts, log: opts.Log, ctx: ctx, cancel: cancel,
		issuers: map[string]*managed{}, states: map[string]translator.ACMEState{}, challenges: map[string]*irv1.ACMEChallenge{}}
}

// Close stops obtaining and renewing; certificates already obtained stay in the storage.
func (m *Manager) Close() {
	m.mu.Lock()
	m.closed = true
	issuers := slices.Collect(maps.Values(m.issuers))
	m.issuers = map[string]*managed{}
	m.mu.Unlock()
	m.cancel()
	for _, mg := range issuers {
		mg.cache.Stop()
	}
}

// Sync makes the Manager obtain and keep renewed the certificates of orders (a translation's
// Result.ACME). Names already managed are left alone; a certificate in the storage is loaded
// rather than ordered again.
func (m *Manager) Sync(orders []*translator.ACMEOrder) {
	for _, o := range orders {
		mg, err := m.issuer(o.Issuer)
		if err != nil {
			m.failed(o.Issuer.Key(), o.Hostname, o.Issuer.Directory, err)
			continue
		}
		m.mu.Lock()
		if mg.names[o.Hostname] {
			m.mu.Unlock()
			continue
		}
		mg.names[o.Hostname] = true
		m.mu.Unlock()
		if err := mg.cfg.ManageAsync(m.ctx, []string{o.Hostname}); err != nil {
			m.failed(o.Issuer.Key(), o.Hostname, o.Issuer.Directory, err)
		}
	}
}

// issuer returns the certmagic config of spec, making it the first time.
func (m *Manager) issuer(spec *translator.ACMEIssuer) (*managed, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, errors.New("the ACME client is stopped")
	}
	key := spec.Key()
	if mg := m.issuers[key]; mg != nil {
		return mg, nil
	}
	var dns acmez.Solver
	if spec.DNSProvider != "" {
		p, err := loadDNSProvider(m.ctx, m.opts.Registry, spec.DNSProvider, m.log)
		if err != nil {
			return nil, err
		}
		dns = &certmagic.DNS01Solver{DNSManager: certmagic.DNSManager{DNSProvider: p}}
	}
	iss, err := newIssuer(m, spec, dns)
	if err != nil {
		return nil, err
	}
	log := m.log.With(zap.String("directory", spec.Directory))
	mg := &managed{iss: iss, names: map[string]bool{}}
	var cfg *certmagic.Config
	mg.cache = certmagic.NewCache(certmagic.CacheOptions{
		GetConfigForCert:   func(certmagic.Certificate) (*certmagic.Config, error) { return cfg, nil },
		RenewCheckInterval: m.opts.RenewCheckInterval,
		Logger:             log,
	})
	cfg = certmagic.New(mg.cache, certmagic.Config{
		Storage:            m.opts.Storage,
		Issuers:            []certmagic.Issuer{iss},
		RenewalWindowRatio: m.opts.RenewalWindowRatio,
		// Stapling fetches OCSP responses for the handshakes certmagic serves; here the proxies
		// serve them from the snapshot, and the CA may have no responder (Let's Encrypt dropped
		// OCSP in 2025).
		OCSP: certmagic.OCSPConfig{DisableStapling: true},
		OnEvent: func(ctx context.Context, event string, data map[string]any) error {
			m.event(key, iss, event, data)
			return nil
		},
		Logger: log,
	})
	mg.cfg = cfg
	m.issuers[key] = mg
	return mg, nil
}

// event follows certmagic's events: a certificate obtained, renewed or loaded from the storage
// is read back, a failure recorded.
func (m *Manager) event(key string, iss *issuer, event string, data map[string]any) {
	switch event {
	case "cert_obtained":
		name, _ := data["identifier"].(string)
		go m.load(key, iss, name)
	case "cached_managed_cert":
		sans, _ := data["sans"].([]string)
		for _, name := range sans {
			go m.load(key, iss, name)
		}
	case "cert_failed":
		name, _ := data["identifier"].(string)
		err, _ := data["error"].(error)
		if err == nil {
			err = errors.New("obtaining the certificate failed")
		}
		m.failed(key, name, iss.spec.Directory, err)
	}
}

// load reads the certificate and key of name from the storage into the translator's view.
func (m *Manager) load(key string, iss *issuer, name string) {
	st := m.opts.Storage
	ik := iss.IssuerKey()
	cert, err := st.Load(m.ctx, certmagic.StorageKeys.SiteCert(ik, name))
	if err == nil {
		var pk []byte
		pk, err = st.Load(m.ctx, certmagic.StorageKeys.SitePrivateKey(ik, name))
		if err == nil {
			m.mu.Lock()
			m.states[key+"/"+name] = translator.ACMEState{Certificate: cert, PrivateKey: pk}
			m.mu.Unlock()
			m.log.Info("ACME certificate ready", zap.String("hostname", name), zap.String("directory", iss.spec.Directory))
			m.changed()
			return
		}
	}
	if m.ctx.Err() == nil {
		m.failed(key, name, iss.spec.Directory, fmt.Errorf("reading the certificate from the storage: %w", err))
	}
}

func (m *Manager) failed(key, name, dir string, err error) {
	m.log.Warn("ACME certificate not obtained", zap.String("hostname", name), zap.String("directory", dir), zap.Error(err))
	m.mu.Lock()
	st := m.states[key+"/"+name]
	same := st.Error == err.Error()
	st.Error = err.Error()
	m.states[key+"/"+name] = st
	m.mu.Unlock()
	if m.opts.OnError != nil {
		m.opts.OnError(name, dir, err)
	}
	if !same {
		// Only news: Sync runs after every translation, and an error it meets again (an
		// issuer that cannot be made) must not translate again, forever.
		m.changed()
	}
}

func (m *Manager) changed() {
	if m.opts.OnChange != nil {
		m.opts.OnChange()
	}
}

// State implements translator.ACMESource.
func (m *Manager) State(issuerKey, hostname string) translator.ACMEState {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.states[issuerKey+"/"+hostname]
}

// Challenges implements translator.ACMESource; the caller may keep the slice, not change its
// elements.
func (m *Manager) Challenges() []*irv1.ACMEChallenge {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Collect(maps.Values(m.challenges))
}

func (m *Manager) addChallenge(key string, ch *irv1.ACMEChallenge) {
	m.mu.Lock()
	m.challenges[key] = ch
	m.mu.Unlock()
	m.changed()
}

func (m *Manager) challenge(key string) *irv1.ACMEChallenge {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.challenges[key]
}

func (m *Manager) removeChallenge(key string) {
	m.mu.Lock()
	_, ok := m.challenges[key]
	delete(m.challenges, key)
	m.mu.Unlock()
	if ok {
		m.changed()
	}
}

// Carries reports whether snap carries ch: what a Served implementation waits for.
func Carries(snap *irv1.Snapshot, ch *irv1.ACMEChallenge) bool {
	for _, c := range snap.GetAcmeChallenges() {
		if proto.Equal(c, ch) {
			return true
		}
	}
	return false
}
