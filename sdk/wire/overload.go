package wire

import (
	"errors"
	"math"
	"time"
)

// Overload holds the parameters of the overload levers, flattened into a
// LimitRule's JSON. Zero means "the default" for every one of them.
//
//   - kind throttle (client-side adaptive throttling, outbound): k,
//     window, min_requests;
//   - kind system (adaptive system protection, inbound): cpu, window,
//     cooldown;
//   - kind concurrency, option CoDel queue: queue_target, queue_interval,
//     lifo;
//   - every kind but breaker, option priorities: reserve;
//   - kinds token_bucket and concurrency, option warm-up: warm_up.
type Overload struct {
	// K is the throttle's accepts multiplier: the client sends up to about
	// K × what the backend accepts (default 2, 1–10).
	K float64 `json:"k,omitempty"`
	// CPU is the system rule's CPU usage threshold, a share of what the
	// container may use (default 0.8, 0.05–1).
	CPU float64 `json:"cpu,omitempty"`
	// Cooldown is how long a system rule keeps checking in-flight work
	// after a rejection although the CPU fell below the threshold
	// (default 1s, at most 1m).
	Cooldown Duration `json:"cooldown,omitempty"`
	// QueueTarget turns a concurrency rule's waiting into a CoDel queue:
	// once the shortest wait over a queue_interval stays above this, waiters
	// queue at most this long (1ms–10s; 0: requests never wait).
	QueueTarget Duration `json:"queue_target,omitempty"`
	// QueueInterval is CoDel's observation interval and the longest wait
	// while the queue is healthy (default 100ms, above queue_target, ≤ 1m).
	QueueInterval Duration `json:"queue_interval,omitempty"`
	// LIFO serves the newest waiter first while the queue is overloaded
	// (adaptive LIFO); requires queue_target.
	LIFO bool `json:"lifo,omitempty"`
	// Reserve is the share of capacity held back per criticality step:
	// critical requests may use all of it, degradable ones 1 − reserve,
	// sheddable ones 1 − 2 × reserve (0–0.45; 0: no priorities).
	Reserve float64 `json:"reserve,omitempty"`
	// WarmUp ramps a raised limit over this period instead of at once
	// (at most 1h; 0: changes apply at once).
	WarmUp Duration `json:"warm_up,omitempty"`
}

// Overload defaults the SDK applies to zero parameters.
const (
	DefaultQueueInterval = 100 * time.Millisecond
	MaxReserve           = 0.45
)

// validateOverload checks the overload parameters and reports every bad
// field at once.
func (r *LimitRule) validateOverload() error {
	var errs []error
	bad := func(field, msg string) { errs = append(errs, &FieldError{Field: field, Msg: msg}) }
	between := func(field string, v Duration, lo, hi time.Duration, what string) {
		if v != 0 && (v.D() < lo || v.D() > hi) {
			bad(field, "must be between "+lo.String()+" and "+hi.String()+what)
		}
	}
	switch r.Kind {
	case KindThrottle:
		if r.K != 0 && !(r.K >= 1 && r.K <= 10) { // also refuses NaN
			bad("k", "must be between 1 and 10 (2 lets the backend refuse up to half the requests before any is throttled)")
		}
		between("window", r.Window, time.Second, 10*time.Minute, "")
		if r.MinRequests < 0 {
			bad("min_requests", "must not be negative")
		}
		if r.Scope == ScopeCluster {
			bad("scope", `must be "instance" for kind throttle: each client judges the backend by its own calls`)
		}
	case KindSystem:
		if r.KeyBy.Source != "" {
			bad("key_by.source", "must be empty for kind system: it guards the whole instance")
		}
		if r.Scope == ScopeCluster {
			bad("scope", `must be "instance" for kind system: CPU is a per-host signal`)
		}
		if r.CPU != 0 && !(r.CPU >= 0.05 && r.CPU <= 1) {
			bad("cpu", "must be between 0.05 and 1 (a share of the container's CPU, 0.8 = 80 %)")
		}
		between("window", r.Window, time.Second, 10*time.Minute, "")
		between("cooldown", r.Cooldown, time.Millisecond, time.Minute, "")
	}
	between("queue_target", r.QueueTarget, time.Millisecond, 10*time.Second, "")
	between("queue_interval", r.QueueInterval, time.Millisecond, time.Minute, "")
	if r.QueueTarget == 0 && r.QueueInterval != 0 {
		bad("queue_interval", "needs queue_target")
	} else if r.QueueInterval != 0 && r.QueueInterval <= r.QueueTarget {
		bad("queue_interval", "must be longer than queue_target")
	}
	if r.LIFO && r.QueueTarget == 0 {
		bad("lifo", "needs queue_target")
	}
	if !(r.Reserve >= 0 && r.Reserve <= MaxReserve) || math.IsNaN(r.Reserve) {
		bad("reserve", "must be between 0 and 0.45 (a share of capacity per criticality step)")
	}
	between("warm_up", r.WarmUp, time.Second, time.Hour, "")
	return errors.Join(errs...)
}

// Queue returns the CoDel target and interval of a concurrency rule, the
// interval defaulted; ok is false when the rule does not queue.
func (r *LimitRule) Queue() (target, interval time.Duration, ok bool) {
	if r.QueueTarget <= 0 {
		return 0, 0, false
	}
	interval = r.QueueInterval.D()
	if interval <= 0 {
		interval = max(DefaultQueueInterval, 2*r.QueueTarget.D())
	}
	return r.QueueTarget.D(), interval, true
}
