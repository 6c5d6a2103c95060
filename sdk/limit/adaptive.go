package limit

import (
	"context"
	"time"

	"github.com/switchyard-io/switchyard/sdk/wire"
)

// Adaptive controller constants.
const (
	// AdaptiveMinWindow is the shortest control window; shorter ones make the
	// limit chase latency noise.
	AdaptiveMinWindow = time.Second
	// adaptiveTolerance: a window whose mean latency exceeds the baseline by
	// this factor is congested.
	adaptiveTolerance = 1.5
	// adaptiveMinSamples: fewer successful requests in a window do not move
	// the latency baseline or grow the limit; fewer failures cut it only
	// while the limit binds.
	adaptiveMinSamples = 5
	// adaptiveFailureTolerance: a window in which a larger share of the
	// requests that ended failed (errors, timeouts) is failing.
	adaptiveFailureTolerance = 0.1
	// adaptiveDrift: the baseline creeps 1/adaptiveDrift of the way towards
	// each window's mean, so a permanent slowdown is eventually accepted.
	adaptiveDrift = 64
)

// Adaptive is a concurrency limiter whose bound follows latency and
// failures (a gradient flavour of AIMD, evaluated once per window of at
// least one second):
//
//   - the baseline is the lowest mean latency of a window seen so far (it
//     drifts slowly towards recent windows);
//   - a window whose mean latency is above 1.5 × baseline is congested: the
//     limit is multiplied by baseline×1.5/mean, clamped to [0.5, 0.9];
//   - a window in which more than 10 % of the requests that ended failed
//     (errors and timeouts alike) is failing: the limit is multiplied by
//     1 − failure share, at least 0.5, so a window of nothing but
//     timeouts halves it. Failures count without a minimum number while the
//     limit binds (a request was refused or took the last slot in the
//     window); otherwise at least 5 must fail, so the odd error of a lightly
//     used service does not ratchet the limit down;
//   - otherwise, with at least 5 successful requests, the limit grows by
//     5 % (at least one): slow up, fast down. A window in which no request
//     ended (every call still hanging) holds the limit;
//   - the limit stays within [min, max] and starts at max/2 (cold start);
//   - only successful requests' latency counts: failures are often fast and
//     would make an overloaded service look healthy.
//
// A timeout counts when the caller gives up and finishes the permit, so
// the window should be longer than the usual latency but need not exceed
// the deadline. Windows are closed lazily by admissions and releases, so
// the controller needs no goroutine and runs entirely on the injected
// clock.
type Adaptive struct {
	g        gate // g.mu guards every field below
	clock    Clock
	min, max int
	window   int64

	winStart  int64
	latSum    int64 // latency of the window's successful requests
	samples   int64 // successful requests that ended in the window
	failures  int64 // failed requests that ended in the window
	saturated bool  // the limit bound in the window: a refusal, or the last slot taken
	baseline  int64
}

// NewAdaptive returns an adaptive limiter; window below AdaptiveMinWindow is
// raised to it, a nil clock means SystemClock.
func NewAdaptive(lo, hi int, window time.Duration, clock Clock) *Adaptive {
	a := &Adaptive{clock: orSystem(clock)}
	a.g.clock = a.clock
	a.winStart = a.clock.Nanotime()
	a.setBounds(lo, hi, window)
	a.g.setMaxLocked(max(a.min, a.max/2))
	return a
}

func (a *Adaptive) setBounds(lo, hi int, window time.Duration) {
	a.min, a.max = max(lo, 1), max(hi, lo, 1)
	a.window = int64(max(window, AdaptiveMinWindow))
}

// TryAcquire takes a slot if the current limit allows.
func (a *Adaptive) TryAcquire() (Permit, Decision) { return a.AdmitAs(Critical) }

// AdmitAs takes a slot if the current limit allows one for a request of
// criticality c (see SetReserve).
func (a *Adaptive) AdmitAs(c Criticality) (Permit, Decision) {
	now := a.clock.Nanotime()
	a.g.mu.Lock()
	a.tickLocked(now)
	ok := a.tryLocked(c)
	a.g.mu.Unlock()
	if !ok {
		return Permit{}, Decision{Reason: ReasonConcurrency}
	}
	return Permit{r: a, start: now}, Decision{OK: true}
}

// Acquire waits for a slot until ctx ends. Latency is measured from the
// moment the slot is granted.
func (a *Adaptive) Acquire(ctx context.Context) (Permit, error) { return a.AcquireAs(ctx, Critical) }

// AcquireAs is Acquire for a request of criticality c: it is served after
// every waiting request of a higher criticality.
func (a *Adaptive) AcquireAs(ctx context.Context, c Criticality) (Permit, error) {
	a.g.mu.Lock()
	a.tickLocked(a.clock.Nanotime())
	if !a.tryLocked(c) {
		if err := a.g.wait(ctx, c); err != nil {
			return Permit{}, err
		}
	} else {
		a.g.mu.Unlock()
	}
	return Permit{r: a, start: a.clock.Nanotime()}, nil
}

// tryLocked takes a slot and notes whether the limit bound; a.g.mu is held.
func (a *Adaptive) tryLocked(c Criticality) bool {
	ok := a.g.tryLocked(c)
	if !ok || a.g.inflight >= a.g.max {
		a.saturated = true
	}
	return ok
}

// Limit reports the current concurrency limit.
func (a *Adaptive) Limit() int {
	a.g.mu.Lock()
	defer a.g.mu.Unlock()
	return a.g.max
}

// InFlight reports the slots taken.
func (a *Adaptive) InFlight() int {
	a.g.mu.Lock()
	defer a.g.mu.Unlock()
	return a.g.inflight
}

func (a *Adaptive) release(p Permit, failed bool) {
	now := a.clock.Nanotime()
	a.g.mu.Lock()
	a.g.releaseLocked()
	if failed {
		a.failures++
	} else {
		a.latSum += now - p.start
		a.samples++
	}
	a.tickLocked(now)
	a.g.mu.Unlock()
}

func (a *Adaptive) isFailure(err error) bool { return err != nil }

// tickLocked closes the window if it is over and adjusts the limit.
func (a *Adaptive) tickLocked(now int64) {
	if now-a.winStart < a.window {
		return
	}
	gain := 1.0
	if a.samples >= adaptiveMinSamples {
		mean := a.latSum / a.samples
		switch {
		case a.baseline == 0 || mean < a.baseline:
			a.baseline = mean
		default:
			a.baseline += (mean - a.baseline) / adaptiveDrift
		}
		if allowed := float64(a.baseline) * adaptiveTolerance; float64(mean) > allowed {
			gain = min(max(allowed/float64(mean), 0.5), 0.9)
		}
	}
	if a.failures >= adaptiveMinSamples || (a.failures > 0 && a.saturated) {
		if share := float64(a.failures) / float64(a.failures+a.samples); share > adaptiveFailureTolerance {
			gain = min(gain, max(1-share, 0.5))
		}
	}
	limit := a.g.max
	switch {
	case gain < 1:
		limit = int(float64(limit) * gain)
	case a.samples >= adaptiveMinSamples:
		limit += max(1, limit/20)
	}
	a.g.setMaxLocked(min(max(limit, a.min), a.max))
	a.winStart, a.latSum, a.samples, a.failures = now, 0, 0, 0
	a.saturated = a.g.inflight >= a.g.max
}

// SetBounds changes min, max and window; the current limit is clamped into
// the new bounds and the latency baseline is kept.
func (a *Adaptive) SetBounds(lo, hi int, window time.Duration) {
	a.g.mu.Lock()
	defer a.g.mu.Unlock()
	a.setBounds(lo, hi, window)
	a.g.setMaxLocked(min(max(a.g.max, a.min), a.max))
}

// Kind implements Limiter.
func (a *Adaptive) Kind() string { return wire.KindAdaptive }

// Admit implements Limiter; it is TryAcquire.
func (a *Adaptive) Admit() (Permit, Decision) { return a.TryAcquire() }

func (a *Adaptive) update(r *wire.LimitRule) {
	a.SetBounds(r.Min, r.Max, r.Window.D())
	a.SetReserve(r.Reserve)
}

// SetReserve keeps capacity for higher criticalities (see
// Criticality.Share).
func (a *Adaptive) SetReserve(reserve float64) {
	a.g.mu.Lock()
	a.g.reserve = reserve
	a.g.mu.Unlock()
}
