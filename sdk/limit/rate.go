package limit

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchyard-io/switchyard/sdk/wire"
)

// rateParams are the immutable parameters of a rateCore; an update swaps
// the pointer.
type rateParams struct {
	interval int64 // nanoseconds per token
	tau      int64 // how far the schedule may lag behind now: burst × interval
	maxWait  int64 // longest an admitted request may be told to wait
	reserve  float64
}

// maxSpan caps the interval and tau (about 36 years) so that the schedule
// arithmetic cannot overflow int64; only a rule of less than one request per
// 36 years, or a burst worth more than 36 years of tokens, is affected.
const maxSpan = 1 << 60

func newRateParams(rate float64, burst int, maxWait time.Duration) *rateParams {
	// Clamp in floating point before converting: an out-of-range float to
	// int conversion is implementation-defined (on amd64 a rate of 1e-12/s
	// became an interval of 1 ns, i.e. no limit at all).
	iv := min(max(math.Round(1e9/rate), 1), maxSpan)
	tau := min(iv*float64(max(burst, 1)), maxSpan)
	return &rateParams{interval: int64(iv), tau: int64(tau), maxWait: max(int64(maxWait), 0)}
}

// rateCore is the lock-free core shared by TokenBucket and GCRA: a single
// "theoretical arrival time" (tat) updated by compare-and-swap. The bucket
// holds (now − max(tat, now−tau)) / interval tokens; admitting n tokens moves
// tat forward by n × interval. A request whose tat lands at most maxWait in the
// future is admitted and told to wait that long (GCRA); the token bucket has
// maxWait 0.
type rateCore struct {
	tat   atomic.Int64
	_     [56]byte // keep the contended word off the line readers share
	p     atomic.Pointer[rateParams]
	clock Clock
	mu    sync.Mutex // serialises updates
}

func (c *rateCore) init(p *rateParams, clock Clock) {
	c.clock = orSystem(clock)
	c.p.Store(p)
	c.tat.Store(c.clock.Nanotime() - p.tau) // start full
}

func (c *rateCore) allowN(n int) Decision { return c.allowKeep(n, Critical) }

// allowKeep is allowN for a request of criticality cr: a lower criticality
// must leave (1 − share) of the burst in the bucket for higher ones.
func (c *rateCore) allowKeep(n int, cr Criticality) Decision {
	p := c.p.Load()
	var keep int64
	if cr != Critical && p.reserve > 0 {
		// A token bucket keeps part of its burst; a GCRA (burst 1) keeps
		// part of its longest wait.
		keep = int64((1 - cr.Share(p.reserve)) * float64(max(p.tau-p.interval, p.maxWait)))
	}
	cost := int64(n) * p.interval
	now := c.clock.Nanotime()
	fresh := false
	for {
		tat := c.tat.Load()
		base := max(tat, now-p.tau)
		next := base + cost
		wait := next - now
		if wait > p.maxWait-keep {
			// now may predate another goroutine's update (we were
			// preempted after reading it): decide on a reading taken after
			// loading the state before rejecting.
			if !fresh {
				now, fresh = c.clock.Nanotime(), true
				continue
			}
			return Decision{RetryAfter: time.Duration(wait - p.maxWait + keep), Reason: ReasonRate}
		}
		if c.tat.CompareAndSwap(tat, next) {
			return Decision{OK: true, Wait: time.Duration(max(wait, 0))}
		}
	}
}

// tokens reports how many tokens the bucket holds now under params p.
func (c *rateCore) tokens(p *rateParams, now int64) float64 {
	base := max(c.tat.Load(), now-p.tau)
	return float64(now-base) / float64(p.interval)
}

// set installs new parameters keeping the current number of tokens (capped by
// the new burst): a new rate does not refill or drain the bucket.
func (c *rateCore) set(np *rateParams) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		now := c.clock.Nanotime()
		op := c.p.Load()
		tat := c.tat.Load()
		held := c.tokens(op, now)
		if c.tat.CompareAndSwap(tat, now-int64(held*float64(np.interval))) {
			np.reserve = op.reserve
			c.p.Store(np)
			return
		}
	}
}

// TokenBucket admits bursts of up to burst requests and rate requests per
// second on average. Allow is lock-free and allocation-free.
//
// With a warm-up (SetWarmUp), raising the rate ramps it linearly from the
// old rate and burst to the new ones over the warm-up period instead of at
// once; lowering applies at once.
type TokenBucket struct {
	c      rateCore
	warm   atomic.Pointer[warmUp]
	warmMu sync.Mutex // serialises rule changes
	rate   float64    // the rule's rate and burst, the warm-up's target
	burst  int
	period time.Duration
}

// NewTokenBucket returns a full bucket; a nil clock means SystemClock.
func NewTokenBucket(rate float64, burst int, clock Clock) *TokenBucket {
	b := &TokenBucket{rate: rate, burst: burst}
	b.c.init(newRateParams(rate, burst, 0), clock)
	return b
}

// Allow takes one token.
func (b *TokenBucket) Allow() Decision {
	b.tick()
	return b.c.allowN(1)
}

// AllowN takes n tokens at once, or none. n above the burst never succeeds.
func (b *TokenBucket) AllowN(n int) Decision {
	b.tick()
	return b.c.allowN(n)
}

// tick advances a warm-up in progress: one atomic load when there is none.
func (b *TokenBucket) tick() {
	if w := b.warm.Load(); w != nil && w.tick(b.c.clock.Nanotime()) {
		b.warm.CompareAndSwap(w, nil)
	}
}

// SetWarmUp sets the period over which a raised rate ramps up (0: at once).
func (b *TokenBucket) SetWarmUp(d time.Duration) {
	b.warmMu.Lock()
	b.period = d
	b.warmMu.Unlock()
}

// Rate reports the rate in force now (below the rule's during a warm-up).
func (b *TokenBucket) Rate() float64 { return 1e9 / float64(b.c.p.Load().interval) }

// Tokens reports the tokens available now.
func (b *TokenBucket) Tokens() float64 { return b.c.tokens(b.c.p.Load(), b.c.clock.Nanotime()) }

// SetRate changes rate and burst keeping the tokens held. An Allow racing
// with the change may be decided under either setting. A raise with a
// warm-up set ramps from the rate in force now.
func (b *TokenBucket) SetRate(rate float64, burst int) {
	b.warmMu.Lock()
	defer b.warmMu.Unlock()
	now := b.c.clock.Nanotime()
	from := [2]float64{b.rate, float64(b.burst)}
	if w := b.warm.Load(); w != nil {
		from = w.value(now) // a change midway ramps on from where it is
	}
	b.rate, b.burst = rate, burst
	if b.period <= 0 || rate <= from[0] {
		b.warm.Store(nil)
		b.c.set(newRateParams(rate, burst, 0))
		return
	}
	w := newWarmUp(from, [2]float64{rate, float64(burst)}, now, b.period, func(v [2]float64) {
		b.c.set(newRateParams(v[0], max(int(v[1]), 1), 0))
	})
	w.tick(now)
	b.warm.Store(w)
}

// Kind implements Limiter.
func (b *TokenBucket) Kind() string { return wire.KindTokenBucket }

// Admit implements Limiter.
func (b *TokenBucket) Admit() (Permit, Decision) { return Permit{}, b.Allow() }

// AdmitAs implements Limiter: a request below critical may not take the
// tokens the rule's reserve keeps for higher criticalities.
func (b *TokenBucket) AdmitAs(c Criticality) (Permit, Decision) {
	b.tick()
	return Permit{}, b.c.allowKeep(1, c)
}

// SetReserve keeps part of the burst for higher criticalities (see
// Criticality.Share).
func (b *TokenBucket) SetReserve(reserve float64) {
	b.c.mu.Lock()
	defer b.c.mu.Unlock()
	np := *b.c.p.Load()
	np.reserve = reserve
	b.c.p.Store(&np)
}

func (b *TokenBucket) update(r *wire.LimitRule) {
	b.SetWarmUp(r.WarmUp.D())
	b.SetRate(r.Rate, r.Burst)
	b.SetReserve(r.Reserve)
}

// GCRA is a leaky bucket as a meter (the generic cell rate algorithm):
// requests are spaced 1/rate apart; a request that would have to wait longer
// than maxWait is rejected, the others are told how long to wait. It has no
// burst beyond one request.
type GCRA struct{ c rateCore }

// NewGCRA returns an idle GCRA limiter; a nil clock means SystemClock.
func NewGCRA(rate float64, maxWait time.Duration, clock Clock) *GCRA {
	g := &GCRA{}
	g.c.init(newRateParams(rate, 1, maxWait), clock)
	return g
}

// Allow reserves the next slot. Decision.Wait says how long to wait before
// proceeding; a rejection leaves the schedule untouched.
func (g *GCRA) Allow() Decision { return g.c.allowN(1) }

// AllowN reserves n consecutive slots.
func (g *GCRA) AllowN(n int) Decision { return g.c.allowN(n) }

// SetRate changes rate and maximum wait; reservations already made stand.
func (g *GCRA) SetRate(rate float64, maxWait time.Duration) {
	g.c.set(newRateParams(rate, 1, maxWait))
}

// Kind implements Limiter.
func (g *GCRA) Kind() string { return wire.KindGCRA }

// Admit implements Limiter.
func (g *GCRA) Admit() (Permit, Decision) { return Permit{}, g.c.allowN(1) }

// AdmitAs implements Limiter: a request below critical may be told to wait
// only its share of the longest wait (see SetReserve); with max_wait 0
// every criticality is decided alike.
func (g *GCRA) AdmitAs(c Criticality) (Permit, Decision) { return Permit{}, g.c.allowKeep(1, c) }

// SetReserve keeps part of the longest wait for higher criticalities.
func (g *GCRA) SetReserve(reserve float64) {
	g.c.mu.Lock()
	defer g.c.mu.Unlock()
	np := *g.c.p.Load()
	np.reserve = reserve
	g.c.p.Store(&np)
}

func (g *GCRA) update(r *wire.LimitRule) {
	g.SetRate(r.Rate, r.MaxWait.D())
	g.SetReserve(r.Reserve)
}
