package limit

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchyard-io/switchyard/sdk/wire"
)

// State of a circuit breaker.
type State uint8

// Breaker states.
const (
	StateClosed State = iota
	StateOpen
	StateHalfOpen
)

func (s State) String() string {
	switch s {
	case StateClosed:
		return "closed"
	case StateOpen:
		return "open"
	case StateHalfOpen:
		return "half_open"
	}
	return "unknown"
}

// BreakerBuckets is the number of buckets in a breaker's rolling window.
const BreakerBuckets = 10

// breakerStripes splits each bucket's counters so that parallel calls do
// not contend on one cache line (about 1 KiB per breaker in all).
const breakerStripes = 4

// BreakerConfig are a breaker's parameters (the breaker fields of a
// wire.LimitRule plus the hooks).
type BreakerConfig struct {
	ErrorRate        float64       // trips when failures/total reaches it (0: off)
	SlowCallRate     float64       // trips when slow/total reaches it (0: off)
	SlowCallDuration time.Duration // a call at least this long is slow
	MinRequests      int           // no trip below this many calls in the window
	Window           time.Duration // rolling window length
	OpenDuration     time.Duration // first open period
	MaxOpenDuration  time.Duration // cap of the doubling open period (0: no growth)
	HalfOpenProbes   int           // probes admitted while half-open; all must succeed
	// IsFailure classifies a call's non-nil error; nil means every error is
	// a failure. Return false for business errors (bad input, not found) so
	// they count as success.
	IsFailure func(error) bool
	// OnStateChange, if set, is called after every transition (outside any
	// lock, possibly concurrently).
	OnStateChange func(from, to State)
}

// BreakerConfigFromRule copies a rule's breaker parameters.
func BreakerConfigFromRule(r *wire.LimitRule) BreakerConfig {
	return BreakerConfig{
		ErrorRate: r.ErrorRate, SlowCallRate: r.SlowCallRate, SlowCallDuration: r.SlowCallDuration.D(),
		MinRequests: r.MinRequests, Window: r.Window.D(), OpenDuration: r.OpenDuration.D(),
		MaxOpenDuration: r.MaxOpenDuration.D(), HalfOpenProbes: r.HalfOpenProbes,
	}
}

// Counts are the calls a closed breaker has seen in its window.
type Counts struct {
	Total, Failures, Slow int64
}

// Breaker is a circuit breaker over a rolling window of BreakerBuckets
// buckets.
//
// Closed: calls run and are counted; once the window holds MinRequests calls
// and the failure rate reaches ErrorRate or the slow-call rate reaches
// SlowCallRate, it opens. Open: calls fail fast with ErrOpen for the open
// period, which doubles each time a half-open trial fails, up to
// MaxOpenDuration. Half-open: exactly HalfOpenProbes calls are admitted
// (claimed by compare-and-swap); if all succeed it closes with a fresh window
// and base open period, a failed or slow probe reopens it. A probe still
// running after the probe timeout (the longest of Window, OpenDuration and
// SlowCallDuration) counts as failed, so a hung call cannot hold the
// breaker half-open, rejecting everything, for ever.
//
// In the closed state Allow and Done take no lock and do not allocate. Each
// outcome is tagged with the state generation it was admitted under, so a
// call that started before a transition does not count after it.
type Breaker struct {
	st        atomic.Uint64 // generation<<2 | State
	cfg       atomic.Pointer[BreakerConfig]
	ring      atomic.Pointer[Rolling]
	openUntil atomic.Int64
	probes    atomic.Int64 // probe slots left while half-open
	halfOpen  atomic.Int64 // when the current half-open period began
	probeOK   atomic.Int64 // successful probes this half-open period
	clock     Clock

	mu    sync.Mutex // serialises transitions
	trips int        // consecutive opens without closing, under mu
}

// NewBreaker returns a closed breaker; a nil clock means SystemClock.
func NewBreaker(cfg BreakerConfig, clock Clock) *Breaker {
	b := &Breaker{clock: orSystem(clock)}
	b.cfg.Store(normalize(cfg))
	b.ring.Store(NewStripedRolling(cfg.Window/BreakerBuckets, BreakerBuckets, breakerStripes))
	return b
}

func normalize(c BreakerConfig) *BreakerConfig {
	if c.IsFailure == nil {
		c.IsFailure = defaultIsFailure
	}
	c.MinRequests = max(c.MinRequests, 1)
	c.HalfOpenProbes = max(c.HalfOpenProbes, 1)
	c.MaxOpenDuration = max(c.MaxOpenDuration, c.OpenDuration)
	if c.SlowCallRate <= 0 {
		c.SlowCallDuration = 0
	}
	return &c
}

// State reports the current state. An open breaker whose period is over
// reports open until the next call moves it to half-open.
func (b *Breaker) State() State { return State(b.st.Load() & 3) }

// Counts reports the calls in the current window.
func (b *Breaker) Counts() Counts {
	s := b.ring.Load().Sum(b.clock.Nanotime())
	return Counts{Total: s[0], Failures: s[1], Slow: s[2]}
}

// RetryAfter reports how long an open breaker stays open (zero otherwise).
func (b *Breaker) RetryAfter() time.Duration {
	if b.State() != StateOpen {
		return 0
	}
	return time.Duration(max(b.openUntil.Load()-b.clock.Nanotime(), 0))
}

// Allow asks to make one call. On success the Permit must be finished with
// Done (or Finish) when the call returns; otherwise the error is ErrOpen.
func (b *Breaker) Allow() (Permit, error) {
	s := b.st.Load()
	if State(s&3) == StateClosed {
		start := int64(unmeasured)
		if b.cfg.Load().SlowCallDuration > 0 {
			start = b.clock.Nanotime()
		}
		return Permit{r: b, start: start, tag: s}, nil
	}
	return b.allowSlow(s)
}

func (b *Breaker) allowSlow(s uint64) (Permit, error) {
	now := b.clock.Nanotime()
	if State(s&3) == StateOpen {
		if now < b.openUntil.Load() {
			return Permit{}, ErrOpen
		}
		b.transition(s, StateHalfOpen, now)
		s = b.st.Load()
		if State(s&3) == StateClosed {
			return Permit{r: b, start: now, tag: s}, nil
		}
	}
	if State(s&3) != StateHalfOpen {
		return Permit{}, ErrOpen
	}
	for {
		n := b.probes.Load()
		if n <= 0 {
			if now-b.halfOpen.Load() >= probeTimeout(b.cfg.Load()) {
				b.transition(s, StateOpen, now) // the probes hung: a failed trial
			}
			return Permit{}, ErrOpen
		}
		if b.probes.CompareAndSwap(n, n-1) {
			if b.st.Load() != s { // the period ended while we claimed
				return Permit{}, ErrOpen
			}
			return Permit{r: b, start: now, tag: s}, nil
		}
	}
}

// Admit implements Limiter.
func (b *Breaker) Admit() (Permit, Decision) {
	p, err := b.Allow()
	if err != nil {
		return Permit{}, Decision{Reason: ReasonBreakerOpen, RetryAfter: b.RetryAfter()}
	}
	return p, Decision{OK: true}
}

// Do runs fn through the breaker: ErrOpen without calling fn when the
// breaker rejects, fn's error otherwise. A panic in fn counts as a failure
// and propagates.
func (b *Breaker) Do(fn func() error) error {
	p, err := b.Allow()
	if err != nil {
		return err
	}
	finished := false
	defer func() {
		if !finished {
			b.release(p, true)
		}
	}()
	err = fn()
	finished = true
	b.release(p, b.isFailure(err))
	return err
}

// probeTimeout is how long half-open probes may run before the trial
// counts as failed.
func probeTimeout(cfg *BreakerConfig) int64 {
	return int64(max(cfg.Window, cfg.OpenDuration, cfg.SlowCallDuration))
}

// isFailure asks the hook about non-nil errors only: nil is always success.
func (b *Breaker) isFailure(err error) bool { return err != nil && b.cfg.Load().IsFailure(err) }

func (b *Breaker) release(p Permit, failed bool) {
	cfg := b.cfg.Load()
	now := b.clock.Nanotime()
	slow := cfg.SlowCallDuration > 0 && p.start != unmeasured && now-p.start >= int64(cfg.SlowCallDuration)
	if b.st.Load() != p.tag {
		return // admitted under an earlier state; its outcome is stale
	}
	if State(p.tag&3) == StateHalfOpen {
		switch {
		case failed || slow:
			b.transition(p.tag, StateOpen, now)
		case b.probeOK.Add(1) >= int64(cfg.HalfOpenProbes):
			b.transition(p.tag, StateClosed, now)
		}
		return
	}
	r := b.ring.Load()
	r.Add3(now, 1, b2i(failed), b2i(slow))
	if failed || slow {
		b.evaluate(p.tag, cfg, r, now)
	}
}

// unmeasured is the start of a call admitted while slow calls were not
// tracked: if a rule update turns them on before it ends, its duration is
// unknown and it must not count as slow.
const unmeasured = math.MinInt64

func b2i(v bool) int64 {
	if v {
		return 1
	}
	return 0
}

// evaluate trips the breaker if the window is over a threshold.
func (b *Breaker) evaluate(tag uint64, cfg *BreakerConfig, r *Rolling, now int64) {
	s := r.Sum(now)
	total := s[0]
	if total < int64(cfg.MinRequests) {
		return
	}
	if (cfg.ErrorRate > 0 && float64(s[1]) >= cfg.ErrorRate*float64(total)) ||
		(cfg.SlowCallRate > 0 && float64(s[2]) >= cfg.SlowCallRate*float64(total)) {
		b.transition(tag, StateOpen, now)
	}
}

// transition moves from the exact state-and-generation from to state to. It
// does nothing if another goroutine moved first.
func (b *Breaker) transition(from uint64, to State, now int64) {
	b.mu.Lock()
	if b.st.Load() != from {
		b.mu.Unlock()
		return
	}
	cfg := b.cfg.Load()
	switch to {
	case StateOpen:
		// Double once per consecutive trip, saturating at the cap (a
		// shift could overflow and wrap to a short period).
		d := cfg.OpenDuration
		for i := 0; i < b.trips && d < cfg.MaxOpenDuration; i++ {
			if d > cfg.MaxOpenDuration-d {
				d = cfg.MaxOpenDuration
			} else {
				d *= 2
			}
		}
		b.trips++
		b.openUntil.Store(now + int64(d))
	case StateHalfOpen:
		b.probes.Store(int64(cfg.HalfOpenProbes))
		b.probeOK.Store(0)
		b.halfOpen.Store(now)
	case StateClosed:
		b.trips = 0
		b.ring.Load().Reset()
	}
	b.st.Store((from>>2+1)<<2 | uint64(to))
	b.mu.Unlock()
	if cfg.OnStateChange != nil {
		cfg.OnStateChange(State(from&3), to)
	}
}

// SetConfig changes thresholds and hooks keeping the state; a new window
// length starts counting afresh.
func (b *Breaker) SetConfig(cfg BreakerConfig) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if cfg.Window != b.cfg.Load().Window {
		b.ring.Store(NewStripedRolling(cfg.Window/BreakerBuckets, BreakerBuckets, breakerStripes))
	}
	b.cfg.Store(normalize(cfg))
}

// Kind implements Limiter.
func (b *Breaker) Kind() string { return wire.KindBreaker }

func (b *Breaker) update(r *wire.LimitRule) {
	c := BreakerConfigFromRule(r)
	old := b.cfg.Load()
	c.IsFailure, c.OnStateChange = old.IsFailure, old.OnStateChange
	b.SetConfig(c)
}

// AdmitAs implements Limiter; a breaker judges the dependency, not the
// request, so every criticality is decided alike.
func (b *Breaker) AdmitAs(Criticality) (Permit, Decision) { return b.Admit() }
