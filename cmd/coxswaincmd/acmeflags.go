package coxswaincmd

import (
	"flag"
	"os"
	"path/filepath"
	"time"

	"github.com/caddyserver/certmagic"

	"github.com/coxswain-labs/coxswain/controller/acme"
)

// acmeFlags configure the ACME client of `serve` (automatic certificates, docs/https.md).
type acmeFlags struct {
	storage       string
	renewInterval time.Duration
	renewRatio    float64
}

func (f *acmeFlags) register(fs *flag.FlagSet) {
	def := ""
	if dir, err := os.UserHomeDir(); err == nil {
		def = filepath.Join(dir, ".local", "share", "coxswain", "acme")
	}
	fs.StringVar(&f.storage, "acme-storage", def,
		"directory of the ACME accounts, certificates, keys and locks of Gateways that ask for automatic certificates; empty disables ACME")
	fs.DurationVar(&f.renewInterval, "acme-renew-check-interval", 10*time.Minute,
		"how often ACME certificates are checked for renewal (lower it for CAs that issue short-lived certificates)")
	fs.Float64Var(&f.renewRatio, "acme-renewal-window", 1.0/3,
		"the part of an ACME certificate's lifetime left when it is renewed")
}

// options are the runner's ACME options; nil when ACME is off.
func (f *acmeFlags) options() *acme.Options {
	if f.storage == "" {
		return nil
	}
	return &acme.Options{Storage: &certmagic.FileStorage{Path: f.storage},
		RenewCheckInterval: f.renewInterval, RenewalWindowRatio: f.renewRatio}
}

// clusterACMEFlags configure the controller's ACME client: the storage is Secrets and Leases in
// the namespace of the leader-election Lease, shared by the replicas.
type clusterACMEFlags struct {
	off           bool
	namespace     string
	renewInterval time.Duration
	renewRatio    float64
	lockTTL       time.Duration
}

func (f *clusterACMEFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.off, "disable-acme", false, "never obtain ACME certificates, even for Gateways that ask for them")
	fs.StringVar(&f.namespace, "acme-namespace", "",
		"namespace of the Secrets (certificates, keys, accounts) and Leases (locks) of automatic certificates; the leader-election Lease's when empty")
	fs.DurationVar(&f.renewInterval, "acme-renew-check-interval", 10*time.Minute,
		"how often ACME certificates are checked for renewal (lower it for CAs that issue short-lived certificates)")
	fs.Float64Var(&f.renewRatio, "acme-renewal-window", 1.0/3, "the part of an ACME certificate's lifetime left when it is renewed")
	fs.DurationVar(&f.lockTTL, "acme-lock-ttl", 30*time.Second,
		"how long an issuance lock (a Lease) of a replica that stopped renewing it holds before another replica may take it over")
}

func (f *clusterACMEFlags) options() *acme.Options {
	if f.off {
		return nil
	}
	return &acme.Options{Storage: &acme.SecretStorage{Namespace: f.namespace, LockTTL: f.lockTTL},
		RenewCheckInterval: f.renewInterval, RenewalWindowRatio: f.renewRatio}
}
