package limit

import (
	"fmt"

	"github.com/switchyard-io/switchyard/sdk/wire"
)

// Limiter is what every rule kind offers the layer above: one non-blocking
// admission per request. Finish the Permit with Done when the request ends.
// The interface is sealed; New builds its implementations.
type Limiter interface {
	// Kind is the wire kind ("token_bucket", …).
	Kind() string
	// Admit decides for one request without blocking.
	Admit() (Permit, Decision)
	// AdmitAs is Admit for a request of a criticality: a rule with a
	// reserve sheds lower criticalities first; breakers decide as Admit.
	AdmitAs(c Criticality) (Permit, Decision)
	update(r *wire.LimitRule)
}

var (
	_ Limiter = (*TokenBucket)(nil)
	_ Limiter = (*GCRA)(nil)
	_ Limiter = (*SlidingWindow)(nil)
	_ Limiter = (*Concurrency)(nil)
	_ Limiter = (*Adaptive)(nil)
	_ Limiter = (*Breaker)(nil)
	_ Limiter = (*Throttler)(nil)
	_ Limiter = (*System)(nil)
)

// Option adjusts what New builds.
type Option func(*options)

type options struct {
	isFailure     func(error) bool
	onStateChange func(from, to State)
	slices        int
	cpu           CPUSource
}

// WithCPU sets the CPU source of a system rule (default ProcessCPU).
func WithCPU(c CPUSource) Option { return func(o *options) { o.cpu = c } }

// WithIsFailure sets a breaker's failure classifier (see BreakerConfig).
func WithIsFailure(f func(error) bool) Option { return func(o *options) { o.isFailure = f } }

// WithStateChange sets a breaker's transition hook (see BreakerConfig).
func WithStateChange(f func(from, to State)) Option {
	return func(o *options) { o.onStateChange = f }
}

// WithSlices sets the counters of a sliding window (default DefaultSlices).
func WithSlices(k int) Option { return func(o *options) { o.slices = k } }

// New builds the limiter for a rule; a nil clock means SystemClock. The rule
// is validated first. key_by, mode and scope are the caller's business (see
// Keyed and Decision.Pass).
func New(r *wire.LimitRule, clock Clock, opts ...Option) (Limiter, error) {
	if err := r.Validate(); err != nil {
		return nil, fmt.Errorf("limit: %w", err)
	}
	return build(r, clock, collect(opts)), nil
}

func collect(opts []Option) options {
	var o options
	for _, f := range opts {
		f(&o)
	}
	return o
}

// build makes the limiter of a validated rule.
func build(r *wire.LimitRule, clock Clock, o options) Limiter {
	switch r.Kind {
	case wire.KindGCRA:
		g := NewGCRA(r.Rate, r.MaxWait.D(), clock)
		g.SetReserve(r.Reserve)
		return g
	case wire.KindSlidingWindow:
		w := NewSlidingWindow(r.Limit, r.Window.D(), o.slices, clock)
		w.SetReserve(r.Reserve)
		return w
	case wire.KindConcurrency:
		c := NewConcurrency(r.Max)
		c.g.clock = orSystem(clock)
		c.update(r) // the first max applies at once: there is nothing to ramp from
		return c
	case wire.KindAdaptive:
		a := NewAdaptive(r.Min, r.Max, r.Window.D(), clock)
		a.SetReserve(r.Reserve)
		return a
	case wire.KindTokenBucket:
		b := NewTokenBucket(r.Rate, r.Burst, clock)
		b.SetReserve(r.Reserve)
		b.SetWarmUp(r.WarmUp.D())
		return b
	case wire.KindThrottle:
		t := NewThrottler(r.K, r.Window.D(), r.MinRequests, clock)
		t.SetReserve(r.Reserve)
		return t
	case wire.KindSystem:
		cpu := o.cpu
		if cpu == nil {
			cpu = ProcessCPU()
		}
		s := NewSystem(r.CPU, r.Window.D(), r.Cooldown.D(), cpu, clock)
		s.SetReserve(r.Reserve)
		return s
	case wire.KindBreaker:
		c := BreakerConfigFromRule(r)
		c.IsFailure, c.OnStateChange = o.isFailure, o.onStateChange
		return NewBreaker(c, clock)
	}
	panic("limit: build of unvalidated kind " + r.Kind) // Validate rejects unknown kinds
}

// Update applies a changed rule to l. If the kind is the same, l keeps its
// state and is returned:
//
//   - token_bucket: new rate and burst, the tokens held are kept (capped);
//     with warm_up a raise ramps from the rate in force;
//   - gcra: new rate and max wait, queued reservations are kept;
//   - sliding_window: a new limit keeps the counts, a new window restarts them;
//   - concurrency: new max, requests in flight stay counted (a raise with
//     warm_up ramps; a new queue_target or queue_interval restarts the
//     CoDel state);
//   - adaptive: new bounds clamp the current limit, the baseline is kept;
//   - breaker: new thresholds keep the state (closed/open/half-open), a new
//     window restarts the counts;
//   - throttle and system: new parameters keep the counts, a new window
//     restarts them.
//
// A different kind (or a nil l) gets a fresh limiter from New. On error l is
// returned unchanged.
func Update(l Limiter, r *wire.LimitRule, clock Clock, opts ...Option) (Limiter, error) {
	if l == nil || l.Kind() != r.Kind {
		n, err := New(r, clock, opts...)
		if err != nil {
			return l, err
		}
		return n, nil
	}
	if err := r.Validate(); err != nil {
		return l, fmt.Errorf("limit: %w", err)
	}
	l.update(r)
	return l, nil
}
