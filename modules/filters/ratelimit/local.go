package ratelimit

import (
	"hash/maphash"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
)

// DefaultMaxKeys is how many keys' buckets one Local RateLimit keeps at most, per proxy
// (--module-setting ratelimit.local.max-keys changes it). A bucket costs about 130 bytes with its
// map slot (200 with a 64-byte header key), so this bounds one object's memory near 13 MiB (20
// at most), whatever the number of distinct clients; TestKeyFloodMemory holds it under 32 MiB.
const DefaultMaxKeys = 100_000

// numShards splits a store's map so that concurrent requests seldom share a lock.
const numShards = 64

// sweepEvery bounds how often a full shard is swept for idle buckets on the request path; a
// flood of new keys meanwhile goes to the overflow bucket rather than sweeping per request.
const sweepEvery = time.Second

// bucketStore keeps one token bucket (a rate.Limiter) per key, in shards. A bucket that has
// refilled to full is the same as no bucket, so idle keys are evicted: by a janitor goroutine
// every refill period (between 1 s and 1 min), and on the request path when a shard is at its
// share of the cap. When a shard is at its cap and none of its buckets is full, a new key is
// counted against one overflow bucket shared by all such keys (same rate and burst as one key):
// the keys already tracked keep their own limits, and a flood of new keys cannot grow the map,
// only share one key's allowance until buckets refill.
type bucketStore[K comparable] struct {
	limit    rate.Limit
	burst    int
	perShard int
	hash     func(K) uint64
	clone    func(K) K // a copy that does not pin the request's memory

	shards   [numShards]shard[K]
	overflow *rate.Limiter
	// overflowed counts takes that went to the overflow bucket (tests, and a hint in the log).
	overflowed atomic.Uint64

	stop chan struct{}
	done chan struct{}
}

type shard[K comparable] struct {
	mu        sync.Mutex
	m         map[K]*rate.Limiter
	lastSweep time.Time
	_         [40]byte // keep neighbouring shards' locks off one cache line
}

func newBucketStore[K comparable](limit rate.Limit, burst, maxKeys int, hash func(K) uint64, clone func(K) K) *bucketStore[K] {
	s := &bucketStore[K]{
		limit: limit, burst: burst, perShard: max(1, maxKeys/numShards), hash: hash, clone: clone,
		overflow: rate.NewLimiter(limit, burst),
		stop:     make(chan struct{}), done: make(chan struct{}),
	}
	for i := range s.shards {
		s.shards[i].m = map[K]*rate.Limiter{}
	}
	go s.janitor(janitorPeriod(limit, burst))
	return s
}

// janitorPeriod is how long an idle bucket takes to refill, within [1 s, 1 min].
func janitorPeriod(limit rate.Limit, burst int) time.Duration {
	full := time.Duration(float64(burst) / float64(limit) * float64(time.Second))
	return min(max(full, time.Second), time.Minute)
}

// take spends one token of k's bucket at now and reports the outcome.
func (s *bucketStore[K]) take(k K, now time.Time) decision {
	sh := &s.shards[s.hash(k)%numShards]
	sh.mu.Lock()
	lim, ok := sh.m[k]
	if !ok {
		if len(sh.m) >= s.perShard && now.Sub(sh.lastSweep) >= sweepEvery {
			s.sweepShard(sh, now)
		}
		if len(sh.m) >= s.perShard {
			sh.mu.Unlock()
			s.overflowed.Add(1)
			return s.decide(s.overflow, now)
		}
		lim = rate.NewLimiter(s.limit, s.burst)
		sh.m[s.clone(k)] = lim
	}
	// Under the shard lock, so that the janitor cannot evict the bucket between the lookup and
	// the spend (which would forget the token).
	d := s.decide(lim, now)
	sh.mu.Unlock()
	return d
}

func (s *bucketStore[K]) decide(lim *rate.Limiter, now time.Time) decision {
	ok := lim.AllowN(now, 1)
	return decisionOf(ok, lim.TokensAt(now), s.limit, s.burst)
}

// sweepShard drops the buckets of sh that are full at now; sh.mu is held.
func (s *bucketStore[K]) sweepShard(sh *shard[K], now time.Time) {
	sh.lastSweep = now
	full := float64(s.burst)
	for k, lim := range sh.m {
		if lim.TokensAt(now) >= full {
			delete(sh.m, k)
		}
	}
}

// sweep drops every full bucket, one shard at a time.
func (s *bucketStore[K]) sweep(now time.Time) {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		s.sweepShard(sh, now)
		sh.mu.Unlock()
	}
}

// len is the number of buckets kept.
func (s *bucketStore[K]) len() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += len(sh.m)
		sh.mu.Unlock()
	}
	return n
}

func (s *bucketStore[K]) janitor(every time.Duration) {
	defer close(s.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case now := <-t.C:
			s.sweep(now)
		}
	}
}

// Close stops the janitor; core.Shared calls it when the last table using the store retires.
func (s *bucketStore[K]) Close() error {
	close(s.stop)
	<-s.done
	return nil
}

var seed = maphash.MakeSeed()

func hashAddr(a netip.Addr) uint64 {
	b := a.As16()
	return maphash.Bytes(seed, b[:])
}

func hashString(s string) uint64 { return maphash.String(seed, s) }

func sameAddr(a netip.Addr) netip.Addr { return a }

// decision is the outcome of one request against a bucket.
type decision struct {
	allowed bool
	// remaining is the whole tokens left after this request.
	remaining int
	// retryAfter is how long until one token is back (0 when allowed); reset how long until the
	// bucket is full again.
	retryAfter, reset time.Duration
}

func decisionOf(allowed bool, tokens float64, limit rate.Limit, burst int) decision {
	d := decision{allowed: allowed, remaining: max(0, int(tokens))}
	perToken := float64(time.Second) / float64(limit)
	if !allowed && tokens < 1 {
		d.retryAfter = time.Duration((1 - tokens) * perToken)
	}
	if missing := float64(burst) - tokens; missing > 0 {
		d.reset = time.Duration(missing * perToken)
	}
	return d
}

// maxKeyLen is the longest header value kept as a key as it is; a longer one is kept as its
// SHA-256, so that a key's memory does not depend on what a client sends.
const maxKeyLen = 64
