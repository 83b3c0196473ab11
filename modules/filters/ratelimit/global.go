package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
	"go.uber.org/zap"
	"golang.org/x/time/rate"
)

// Module settings (--module-setting NAME=VALUE) this module reads.
const (
	// SettingRedisAddress is the Redis server of Global limits: "host:port", or a redis:// or
	// rediss:// URL (which may carry a database number and credentials).
	SettingRedisAddress = "ratelimit.redis.address"
	// SettingRedisTimeout bounds one request's round trip to Redis (a Go duration).
	SettingRedisTimeout = "ratelimit.redis.timeout"
	// SettingMaxKeys is DefaultMaxKeys for this proxy.
	SettingMaxKeys = "ratelimit.local.max-keys"
)

// DefaultRedisTimeout bounds a request's Redis round trip: past it the request is decided by
// failureMode. A loopback or same-zone Redis answers in well under a millisecond.
const DefaultRedisTimeout = 50 * time.Millisecond

// redisBackoff is how long, after redisFailuresToBackoff round trips in a row failed, requests
// are decided by failureMode without trying Redis: an unreachable Redis costs a few timeouts per
// backoff, not one per request. One slow answer alone does not start it (it would leave a
// fail-open limit unenforced for the whole backoff).
const (
	redisBackoff           = time.Second
	redisFailuresToBackoff = 3
)

// bucketScript is a token bucket in one Redis hash per key, atomic because Redis runs a script
// alone, and timed by the Redis server's clock, so the proxies' clocks need not agree. It spends
// one token if there is one and returns {allowed, whole tokens left, µs until a token is back
// (when refused), µs until the bucket is full}. The key expires once the bucket would be full
// again: a full bucket is the same as none, so idle keys cost Redis nothing.
//
// KEYS[1] the bucket; ARGV[1] tokens per second; ARGV[2] burst.
const bucketScript = `
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local s = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(s[1])
local ts = tonumber(s[2])
if tokens == nil or ts == nil then
  tokens = burst
  ts = now
end
if now > ts then
  tokens = math.min(burst, tokens + (now - ts) * rate / 1000000)
end
local allowed = 0
local retry = 0
if tokens >= 1 then
  tokens = tokens - 1
  allowed = 1
else
  retry = math.ceil((1 - tokens) * 1000000 / rate)
end
local reset = math.ceil((burst - tokens) * 1000000 / rate)
redis.call('HSET', KEYS[1], 'tokens', string.format('%.17g', tokens), 'ts', now)
redis.call('PEXPIRE', KEYS[1], math.max(1, math.ceil(reset / 1000)))
return {allowed, math.floor(tokens), retry, reset}
`

var script = redis.NewScript(bucketScript)

// redisConn is one Redis client per address, shared by every Global limit of the proxy
// (core.Shared) and closed with the last table that uses it.
type redisConn struct {
	client  *redis.Client
	timeout time.Duration
	log     *zap.Logger
	// downUntil is when Redis is worth trying again after failures (unix nanoseconds); failures
	// counts the round trips in a row that failed.
	downUntil atomic.Int64
	failures  atomic.Int64
	// warned is when the last failure WARN was logged (unix nanoseconds); suppressed counts the
	// failures since.
	warned     atomic.Int64
	suppressed atomic.Int64
}

// redisLogOnce routes go-redis's own log lines (a process-wide setting of the library) to the
// first Global limit's logger at debug level: the failures they tell of are counted, and WARNed
// at a bounded rate, by redisConn.failed.
var redisLogOnce sync.Once

type redisLog struct{ log *zap.Logger }

func (l redisLog) Printf(_ context.Context, format string, v ...any) {
	l.log.Debug(fmt.Sprintf(format, v...))
}

// newRedisConn makes the client; it connects lazily, on the first request.
func newRedisConn(addr string, timeout time.Duration, log *zap.Logger) (*redisConn, error) {
	redisLogOnce.Do(func() { redis.SetLogger(redisLog{log.Named("go-redis")}) })
	opts := &redis.Options{Addr: addr}
	if strings.Contains(addr, "://") {
		var err error
		if opts, err = redis.ParseURL(addr); err != nil {
			return nil, fmt.Errorf("%s: %w", SettingRedisAddress, err)
		}
	}
	// No retries and no client-side queueing beyond the request's budget: a limit decided late
	// is worse than one decided by failureMode.
	opts.MaxRetries = -1
	opts.DialerRetries = 1
	opts.DialTimeout = max(timeout, time.Second)
	opts.ReadTimeout, opts.WriteTimeout, opts.PoolTimeout = timeout, timeout, timeout
	opts.ContextTimeoutEnabled = true
	opts.Protocol = 2
	opts.DisableIdentity = true
	opts.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	return &redisConn{client: redis.NewClient(opts), timeout: timeout, log: log}, nil
}

// Close implements io.Closer for core.Shared.
func (c *redisConn) Close() error { return c.client.Close() }

// take spends one token of the bucket key in Redis. ok is false when Redis did not answer in
// time (or is in its backoff after a failure): the caller applies failureMode.
func (c *redisConn) take(ctx context.Context, key string, limit rate.Limit, burst int) (decision, bool) {
	if c == nil {
		return decision{}, false
	}
	now := time.Now().UnixNano()
	if now < c.downUntil.Load() {
		return decision{}, false
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	res, err := script.Run(ctx, c.client, []string{key}, float64(limit), burst).Int64Slice()
	if err == nil && len(res) != 4 {
		err = fmt.Errorf("rate limit script returned %v", res)
	}
	if err != nil {
		if errors.Is(err, context.Canceled) && ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return decision{}, false // the client went away; Redis is not to blame
		}
		c.failed(now, err)
		return decision{}, false
	}
	if c.failures.Load() != 0 {
		c.failures.Store(0)
	}
	return decision{
		allowed: res[0] == 1, remaining: int(res[1]),
		retryAfter: time.Duration(res[2]) * time.Microsecond, reset: time.Duration(res[3]) * time.Microsecond,
	}, true
}

// failed starts a backoff after a few failures in a row, and logs a WARN at most every 10 s.
func (c *redisConn) failed(now int64, err error) {
	if c.failures.Add(1) >= redisFailuresToBackoff {
		c.failures.Store(0)
		c.downUntil.Store(now + int64(redisBackoff))
	}
	last := c.warned.Load()
	if now-last < int64(10*time.Second) || !c.warned.CompareAndSwap(last, now) {
		c.suppressed.Add(1)
		return
	}
	c.log.Warn("rate limit store unreachable: Global limits follow their failureMode",
		zap.String("address", c.client.Options().Addr), zap.Error(err),
		zap.Int64("failuresSinceLastWarning", c.suppressed.Swap(0)), zap.Duration("retryIn", redisBackoff))
}
