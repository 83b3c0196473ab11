package integration

import (
	"context"
	"errors"
	"io/fs"
	"slices"
	"testing"
	"time"

	"github.com/caddyserver/certmagic"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/coxswain-labs/coxswain/controller/acme"
	"github.com/coxswain-labs/coxswain/test/integration/env"
)

// TestACMESecretStorage runs certmagic's storage contract on Secrets and Leases of a real API
// server: values round-trip, List and Delete work by prefix, and a lock is exclusive across two
// processes, handed over on Unlock, and taken over once its holder stops renewing it.
func TestACMESecretStorage(t *testing.T) {
	e := env.Start(t)
	ns := namespace(t, e, "acme-storage", nil)
	st := func(id string) *acme.SecretStorage {
		s := &acme.SecretStorage{Client: e.Kube, Namespace: ns, Identity: id, LockTTL: 2 * time.Second, LockPoll: 50 * time.Millisecond}
		t.Cleanup(s.Close)
		return s
	}
	a, b := st("a"), st("b")
	ctx := ctxFor(t)
	var _ certmagic.Storage = a

	t.Run("values", func(t *testing.T) {
		if _, err := a.Load(ctx, "certificates/x/a.example/a.example.crt"); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("Load of a missing key: %v, want fs.ErrNotExist", err)
		}
		for k, v := range map[string]string{"certificates/x/a.example/a.example.crt": "crt", "certificates/x/a.example/a.example.key": "key",
			"certificates/x/b.example/b.example.crt": "crt-b", "acme/account.key": "acct"} {
			if err := a.Store(ctx, k, []byte(v)); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Store(ctx, "certificates/x/a.example/a.example.crt", []byte("crt2")); err != nil {
			t.Fatal(err)
		}
		if v, err := a.Load(ctx, "certificates/x/a.example/a.example.crt"); err != nil || string(v) != "crt2" {
			t.Errorf("Load after an overwrite: %q %v", v, err)
		}
		if ki, err := a.Stat(ctx, "certificates/x/a.example/a.example.crt"); err != nil || !ki.IsTerminal || ki.Size != 4 || ki.Modified.IsZero() {
			t.Errorf("Stat: %+v %v", ki, err)
		}
		if ki, err := a.Stat(ctx, "certificates/x"); err != nil || ki.IsTerminal {
			t.Errorf("Stat of a prefix: %+v %v", ki, err)
		}
		got, err := a.List(ctx, "certificates/x", false)
		slices.Sort(got)
		if err != nil || !slices.Equal(got, []string{"certificates/x/a.example", "certificates/x/b.example"}) {
			t.Errorf("List non-recursive: %v %v", got, err)
		}
		got, _ = a.List(ctx, "certificates", true)
		if len(got) != 3 {
			t.Errorf("List recursive: %v", got)
		}
		if err := a.Delete(ctx, "certificates/x/a.example"); err != nil {
			t.Fatal(err)
		}
		if a.Exists(ctx, "certificates/x/a.example/a.example.key") || !a.Exists(ctx, "certificates/x/b.example/b.example.crt") {
			t.Error("Delete of a prefix removed the wrong keys")
		}
	})

	t.Run("lock is exclusive and handed over on Unlock", func(t *testing.T) {
		if err := a.Lock(ctx, "issue_cert_a.example"); err != nil {
			t.Fatal(err)
		}
		short, cancel := context.WithTimeout(ctx, 3*time.Second) // longer than the TTL: a renews it
		err := b.Lock(short, "issue_cert_a.example")
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("b took a lock a holds and renews: %v", err)
		}
		got := make(chan error, 1)
		go func() { got <- b.Lock(ctx, "issue_cert_a.example") }()
		if err := a.Unlock(ctx, "issue_cert_a.example"); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-got:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(waitFor):
			t.Fatal("b did not get the lock a released")
		}
		if err := b.Unlock(ctx, "issue_cert_a.example"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("a lock whose holder stopped renewing it is taken over", func(t *testing.T) {
		dead := st("dead")
		if err := dead.Lock(ctx, "issue_cert_b.example"); err != nil {
			t.Fatal(err)
		}
		dead.Close() // stops renewing, as a killed process would; the Lease stays
		start := time.Now()
		if err := b.Lock(ctx, "issue_cert_b.example"); err != nil {
			t.Fatal(err)
		}
		if waited := time.Since(start); waited < time.Second {
			t.Errorf("took over a lock renewed %s ago, before its 2s TTL", waited)
		}
		leases, err := e.Kube.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{LabelSelector: acme.StorageLabel})
		if err != nil || len(leases.Items) != 1 || ptr.Deref(leases.Items[0].Spec.HolderIdentity, "") != "b" {
			t.Fatalf("leases %v %v, want one held by b", leases, err)
		}
		if err := b.Unlock(ctx, "issue_cert_b.example"); err != nil {
			t.Fatal(err)
		}
	})
}
