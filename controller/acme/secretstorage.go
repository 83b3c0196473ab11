package acme

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/certmagic"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// Labels and annotations of the objects SecretStorage keeps.
const (
	// StorageLabel marks the Secrets and Leases of the ACME storage; its value is the storage's
	// name, so two controllers of different installations in one namespace keep apart.
	StorageLabel = "acme.coxswain-labs.dev/storage"
	// KeyAnnotation holds the certmagic key a Secret stores (its name is a hash of it).
	KeyAnnotation = "acme.coxswain-labs.dev/key"
	// ModifiedAnnotation is when the value was stored (RFC 3339, nanoseconds).
	ModifiedAnnotation = "acme.coxswain-labs.dev/modified"
	valueKey           = "value"
)

// SecretStorage is a certmagic.Storage in Secrets of one namespace: one Secret per key, named by
// a hash of it (certmagic keys are paths, longer than a name may be). Its locks are Leases: a
// Lock creates one, renews it while held, and takes over one whose holder stopped renewing it
// for LockTTL (a controller that died holding it). certmagic takes the lock of a name around
// every issuance and checks the storage again once it has it, so a new leader waiting on the
// lock of a dying one finds its certificate instead of ordering another.
type SecretStorage struct {
	Client    kubernetes.Interface
	Namespace string
	// Name tells apart storages in one namespace ("coxswain" when empty).
	Name string
	// Identity is this process's, recorded as the holder of its locks.
	Identity string
	// LockTTL is how long a lock lives without renewal before another process may take it
	// (30s when zero); it is renewed every third of it, and polled for every LockPoll (1s).
	LockTTL, LockPoll time.Duration

	mu    sync.Mutex
	held  map[string]context.CancelFunc // lock name → stops its renewal
	heldW sync.WaitGroup
}

var (
	_ certmagic.Storage = (*SecretStorage)(nil)
	_ certmagic.Locker  = (*SecretStorage)(nil)
)

func (s *SecretStorage) name() string {
	if s.Name == "" {
		return "coxswain"
	}
	return s.Name
}

func (s *SecretStorage) objectName(kind, key string) string {
	sum := sha256.Sum256([]byte(s.name() + "\x00" + key))
	return "coxswain-acme-" + kind + "-" + hex.EncodeToString(sum[:])[:32]
}

func (s *SecretStorage) secrets() interface {
	Get(context.Context, string, metav1.GetOptions) (*corev1.Secret, error)
} {
	return s.Client.CoreV1().Secrets(s.Namespace)
}

// Store implements certmagic.Storage.
func (s *SecretStorage) Store(ctx context.Context, key string, value []byte) error {
	api := s.Client.CoreV1().Secrets(s.Namespace)
	name := s.objectName("data", key)
	now := time.Now().UTC().Format(time.RFC3339Nano)
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.Namespace,
			Labels:      map[string]string{StorageLabel: s.name()},
			Annotations: map[string]string{KeyAnnotation: key, ModifiedAnnotation: now}},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{valueKey: value},
	}
	_, err := api.Create(ctx, sec, metav1.CreateOptions{FieldManager: "coxswain-acme"})
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	for {
		cur, err := api.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Data = sec.Data
		if cur.Annotations == nil {
			cur.Annotations = map[string]string{}
		}
		cur.Annotations[KeyAnnotation], cur.Annotations[ModifiedAnnotation] = key, now
		_, err = api.Update(ctx, cur, metav1.UpdateOptions{FieldManager: "coxswain-acme"})
		if !apierrors.IsConflict(err) {
			return err
		}
	}
}

// Load implements certmagic.Storage.
func (s *SecretStorage) Load(ctx context.Context, key string) ([]byte, error) {
	sec, err := s.secrets().Get(ctx, s.objectName("data", key), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fs.ErrNotExist
	}
	if err != nil {
		return nil, err
	}
	return sec.Data[valueKey], nil
}

// Exists implements certmagic.Storage.
func (s *SecretStorage) Exists(ctx context.Context, key string) bool {
	_, err := s.Load(ctx, key)
	return err == nil
}

// list returns the Secrets of keys under prefix (all of them for "").
func (s *SecretStorage) list(ctx context.Context, prefix string) ([]corev1.Secret, error) {
	l, err := s.Client.CoreV1().Secrets(s.Namespace).List(ctx, metav1.ListOptions{LabelSelector: StorageLabel + "=" + s.name()})
	if err != nil {
		return nil, err
	}
	var out []corev1.Secret
	for _, sec := range l.Items {
		k := sec.Annotations[KeyAnnotation]
		if prefix == "" || k == prefix || strings.HasPrefix(k, strings.TrimSuffix(prefix, "/")+"/") {
			out = append(out, sec)
		}
	}
	return out, nil
}

// Delete implements certmagic.Storage: the key, or every key under it.
func (s *SecretStorage) Delete(ctx context.Context, key string) error {
	secs, err := s.list(ctx, key)
	if err != nil {
		return err
	}
	for _, sec := range secs {
		err := s.Client.CoreV1().Secrets(s.Namespace).Delete(ctx, sec.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// List implements certmagic.Storage.
func (s *SecretStorage) List(ctx context.Context, prefix string, recursive bool) ([]string, error) {
	secs, err := s.list(ctx, prefix)
	if err != nil {
		return nil, err
	}
	if len(secs) == 0 {
		return nil, fs.ErrNotExist
	}
	seen := map[string]bool{}
	var out []string
	base := strings.TrimSuffix(prefix, "/")
	for _, sec := range secs {
		k := sec.Annotations[KeyAnnotation]
		if !recursive && base != "" {
			rest := strings.TrimPrefix(k, base+"/")
			if i := strings.IndexByte(rest, '/'); i >= 0 {
				k = path.Join(base, rest[:i])
			}
		}
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out, nil
}

// Stat implements certmagic.Storage.
func (s *SecretStorage) Stat(ctx context.Context, key string) (certmagic.KeyInfo, error) {
	sec, err := s.secrets().Get(ctx, s.objectName("data", key), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		secs, lerr := s.list(ctx, key)
		if lerr == nil && len(secs) > 0 {
			return certmagic.KeyInfo{Key: key, IsTerminal: false}, nil
		}
		return certmagic.KeyInfo{}, fs.ErrNotExist
	}
	if err != nil {
		return certmagic.KeyInfo{}, err
	}
	mod, _ := time.Parse(time.RFC3339Nano, sec.Annotations[ModifiedAnnotation])
	return certmagic.KeyInfo{Key: key, Modified: mod, Size: int64(len(sec.Data[valueKey])), IsTerminal: true}, nil
}

func (s *SecretStorage) ttl() time.Duration {
	if s.LockTTL > 0 {
		return s.LockTTL
	}
	return 30 * time.Second
}

// Lock implements certmagic.Locker: it blocks until this process holds the Lease of name, taking
// over one whose holder has not renewed it within LockTTL.
func (s *SecretStorage) Lock(ctx context.Context, name string) error {
	api := s.Client.CoordinationV1().Leases(s.Namespace)
	lname := s.objectName("lock", name)
	poll := s.LockPoll
	if poll <= 0 {
		poll = time.Second
	}
	for {
		now := metav1.NewMicroTime(time.Now())
		lease := &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: lname, Namespace: s.Namespace,
				Labels: map[string]string{StorageLabel: s.name()}, Annotations: map[string]string{KeyAnnotation: name}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(s.Identity), AcquireTime: &now, RenewTime: &now,
				LeaseDurationSeconds: ptr.To(int32(s.ttl() / time.Second))},
		}
		_, err := api.Create(ctx, lease, metav1.CreateOptions{})
		if err == nil {
			s.hold(name, lname)
			return nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("taking the lock %s: %w", name, err)
		}
		cur, err := api.Get(ctx, lname, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			continue // released meanwhile
		case err != nil:
			return fmt.Errorf("reading the lock %s: %w", name, err)
		}
		if stale(cur, time.Now()) {
			// Its holder stopped renewing it: take it over, unless someone else did first (the
			// update carries the resourceVersion read, so only one process wins).
			cur.Spec.HolderIdentity, cur.Spec.AcquireTime, cur.Spec.RenewTime = ptr.To(s.Identity), &now, &now
			cur.Spec.LeaseDurationSeconds = lease.Spec.LeaseDurationSeconds
			if _, err := api.Update(ctx, cur, metav1.UpdateOptions{}); err == nil {
				s.hold(name, lname)
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(poll):
		}
	}
}

func stale(l *coordinationv1.Lease, now time.Time) bool {
	if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return true
	}
	return now.After(l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second))
}

// hold renews the Lease until Unlock.
func (s *SecretStorage) hold(name, lname string) {
	ctx, cancel := context.WithCancel(context.Background())
	s.mu.Lock()
	if s.held == nil {
		s.held = map[string]context.CancelFunc{}
	}
	s.held[name] = cancel
	s.mu.Unlock()
	api := s.Client.CoordinationV1().Leases(s.Namespace)
	s.heldW.Go(func() {
		t := time.NewTicker(s.ttl() / 3)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			cur, err := api.Get(ctx, lname, metav1.GetOptions{})
			if err != nil || ptr.Deref(cur.Spec.HolderIdentity, "") != s.Identity {
				return // lost: someone took it over after we failed to renew
			}
			cur.Spec.RenewTime = ptr.To(metav1.NewMicroTime(time.Now()))
			_, _ = api.Update(ctx, cur, metav1.UpdateOptions{})
		}
	})
}

// Unlock implements certmagic.Locker: it stops renewing the Lease and deletes it, if this process
// still holds it.
func (s *SecretStorage) Unlock(ctx context.Context, name string) error {
	s.mu.Lock()
	cancel, ok := s.held[name]
	delete(s.held, name)
	s.mu.Unlock()
	if !ok {
		return errors.New("lock " + name + " is not held")
	}
	cancel()
	api := s.Client.CoordinationV1().Leases(s.Namespace)
	lname := s.objectName("lock", name)
	cur, err := api.Get(ctx, lname, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if ptr.Deref(cur.Spec.HolderIdentity, "") != s.Identity {
		return nil // taken over already
	}
	err = api.Delete(ctx, lname, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &cur.ResourceVersion}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// Close stops renewing every lock held (a leadership term ends); they go stale after LockTTL.
func (s *SecretStorage) Close() {
	s.mu.Lock()
	for _, c := range s.held {
		c()
	}
	s.held = nil
	s.mu.Unlock()
	s.heldW.Wait()
}
