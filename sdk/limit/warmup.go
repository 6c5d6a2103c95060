package limit

import (
	"sync/atomic"
	"time"
)

// warmSteps is how many steps a warm-up takes at most: the limit moves
// every 1/warmSteps of the period (a 10 s warm-up steps every 100 ms).
const warmSteps = 100

// warmUp ramps a limit linearly from its old value to a raised one over a
// period, so traffic held back during an incident returns gradually
// (Sentinel's WarmUp, Guava's SmoothWarmingUp; here triggered by the rule
// being relaxed). Limiters call tick on admissions; the ramp applies a new
// value at most once per step, and nothing once it is done.
type warmUp struct {
	from, to    [2]float64 // the ramped values (rate and burst, or max)
	start, span int64
	next        atomic.Int64 // clock reading of the next step
	apply       func(v [2]float64)
}

// newWarmUp ramps from → to over span starting at now; apply installs a
// value (under the limiter's own lock).
func newWarmUp(from, to [2]float64, now int64, span time.Duration, apply func([2]float64)) *warmUp {
	w := &warmUp{from: from, to: to, start: now, span: int64(span), apply: apply}
	w.next.Store(now)
	return w
}

// tick applies the value for now if a step is due; it reports whether the
// ramp has reached its end.
func (w *warmUp) tick(now int64) (done bool) {
	next := w.next.Load()
	if now < next || !w.next.CompareAndSwap(next, now+max(w.span/warmSteps, 1)) {
		return false
	}
	f := min(float64(now-w.start)/float64(w.span), 1)
	var v [2]float64
	for i := range v {
		v[i] = w.from[i] + (w.to[i]-w.from[i])*f
	}
	w.apply(v)
	return f >= 1
}

// value is the ramp's value at now (for a ramp that is replaced midway).
func (w *warmUp) value(now int64) [2]float64 {
	f := min(max(float64(now-w.start)/float64(w.span), 0), 1)
	var v [2]float64
	for i := range v {
		v[i] = w.from[i] + (w.to[i]-w.from[i])*f
	}
	return v
}
