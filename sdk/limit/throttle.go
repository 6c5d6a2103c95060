package limit

import (
	"math"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/switchyard-io/switchyard/sdk/wire"
)

// Throttle defaults (the Google SRE book's "Handling Overload" values, with
// a shorter window so a healed backend is trusted again within seconds).
const (
	DefaultThrottleK           = 2.0
	DefaultThrottleWindow      = 10 * time.Second
	DefaultThrottleMinRequests = 10
	// throttleBuckets divides the window.
	throttleBuckets = 10
	// throttleStripes spreads parallel Adds over cache lines.
	throttleStripes = 4
)

// Throttler is client-side adaptive throttling (Google SRE book, "Handling
// Overload"): the caller of a backend counts, over a sliding window, the
// requests it attempted and the ones the backend accepted, and rejects a
// new request locally with probability
//
//	max(0, (requests − K·accepts) / (requests + 1))
//
// so a backend that refuses most of its work is not buried under calls
// (and retries) it would refuse anyway. While the backend accepts
// everything the probability is 0; at K = 2 a backend may refuse up to half
// the requests before any is throttled. Locally rejected requests count as
// requests, so the sent rate settles near K × accepts. Below min_requests in
// the window nothing is throttled. Admissions judge by the window's counts
// as of at most a ten-thousandth of the window ago (1 ms of a 10 s window).
//
// A permit's Done(err) (or Finish(ok)) reports whether the backend accepted
// the request: err == nil, or ok. Transports call Finish with their own
// judgement (the SDK's HTTP round-tripper counts 429 and 503 answers and
// transport errors as refusals). Admit takes no lock and allocates nothing.
type Throttler struct {
	clock Clock
	p     atomic.Pointer[throttleParams]
	ring  atomic.Pointer[Rolling] // counter 0: requests, 1: accepts
	rand  func() float64

	// The window's sums, refreshed at most every window/throttleRefresh:
	// summing the ring is most of an admission's cost, and counts a
	// ten-thousandth of a window old change the probability by about as much.
	next     atomic.Int64
	requests atomic.Int64
	accepts  atomic.Int64
}

// throttleRefresh is how many times per window admissions re-sum the ring.
const throttleRefresh = 10_000

type throttleParams struct {
	k           float64
	minRequests int64
	window      time.Duration
	reserve     float64
}

// NewThrottler returns a throttler; k below 1, a window of 0 and
// minRequests below 0 take the defaults. A nil clock means SystemClock.
func NewThrottler(k float64, window time.Duration, minRequests int, clock Clock) *Throttler {
	t := &Throttler{clock: orSystem(clock), rand: rand.Float64}
	t.set(k, window, minRequests)
	return t
}

func (t *Throttler) set(k float64, window time.Duration, minRequests int) {
	if k < 1 || math.IsNaN(k) {
		k = DefaultThrottleK
	}
	if window <= 0 {
		window = DefaultThrottleWindow
	}
	if minRequests <= 0 {
		minRequests = DefaultThrottleMinRequests
	}
	old := t.p.Load()
	np := &throttleParams{k: k, minRequests: int64(minRequests), window: window}
	if old != nil {
		np.reserve = old.reserve
	}
	t.p.Store(np)
	if old == nil || old.window != window {
		t.ring.Store(NewStripedRolling(window/throttleBuckets, throttleBuckets, throttleStripes))
		t.next.Store(math.MinInt64)
	}
}

// counts returns the window's sums as of at most window/throttleRefresh ago.
func (t *Throttler) counts(now int64, r *Rolling, p *throttleParams) (requests, accepts int64) {
	if next := t.next.Load(); now >= next && t.next.CompareAndSwap(next, now+int64(p.window)/throttleRefresh) {
		s := r.Sum(now)
		t.requests.Store(s[0])
		t.accepts.Store(s[1])
		return s[0], s[1]
	}
	return t.requests.Load(), t.accepts.Load()
}

// SetReserve makes lower criticalities throttle earlier: their K is
// 1 + (K − 1) × Criticality.Share(reserve).
func (t *Throttler) SetReserve(reserve float64) {
	np := *t.p.Load()
	np.reserve = reserve
	t.p.Store(&np)
}

// SetRand replaces the uniform [0, 1) source behind the random rejection
// (math/rand/v2 by default); tests pass a deterministic one.
func (t *Throttler) SetRand(f func() float64) { t.rand = f }

// Probability is the share of requests that would be rejected now for the
// highest criticality.
func (t *Throttler) Probability() float64 {
	s := t.ring.Load().Sum(t.clock.Nanotime())
	return throttleProbability(t.p.Load(), s[0], s[1], 1)
}

// throttleProbability is the SRE formula with K scaled by share: a lower
// criticality gets a smaller K, so it is throttled earlier and harder.
func throttleProbability(p *throttleParams, requests, accepts int64, share float64) float64 {
	if requests < p.minRequests {
		return 0
	}
	k := 1 + (p.k-1)*share
	return max(0, (float64(requests)-k*float64(accepts))/float64(requests+1))
}

// Counts reports the requests and accepts in the window.
func (t *Throttler) Counts() (requests, accepts int64) {
	s := t.ring.Load().Sum(t.clock.Nanotime())
	return s[0], s[1]
}

// Admit implements Limiter: it counts the request and rejects it with the
// current probability (reason throttled).
func (t *Throttler) Admit() (Permit, Decision) { return t.AdmitAs(Critical) }

// AdmitAs implements Limiter: a lower criticality uses a K nearer 1 (see
// SetReserve).
func (t *Throttler) AdmitAs(c Criticality) (Permit, Decision) {
	now := t.clock.Nanotime()
	r := t.ring.Load()
	p := t.p.Load()
	requests, accepts := t.counts(now, r, p)
	r.Add(now, 0, 1)
	pm := Permit{r: t, start: now}
	if pr := throttleProbability(p, requests, accepts, c.Share(p.reserve)); pr > 0 && t.rand() < pr {
		// The permit of a refusal still counts an accept if the call is
		// made anyway (shadow mode), so the window sees what the backend did.
		return pm, Decision{Reason: ReasonThrottled}
	}
	return pm, Decision{OK: true}
}

// Kind implements Limiter.
func (t *Throttler) Kind() string { return wire.KindThrottle }

func (t *Throttler) update(r *wire.LimitRule) {
	t.set(r.K, r.Window.D(), r.MinRequests)
	t.SetReserve(r.Reserve)
}

// release counts an accept in the bucket of its admission (saving a clock
// read; a call that outlives the window is not counted).
func (t *Throttler) release(p Permit, failed bool) {
	if !failed {
		t.ring.Load().Add(p.start, 1, 1)
	}
}

func (t *Throttler) isFailure(err error) bool { return err != nil }
