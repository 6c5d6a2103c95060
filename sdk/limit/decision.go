package limit

import (
	"errors"
	"time"

	"github.com/switchyard-io/switchyard/sdk/wire"
)

// Sentinel errors. Callers (and sdk/retry) test them with errors.Is.
var (
	// ErrLimited means a limiter rejected the request.
	ErrLimited = errors.New("limit: rejected by limiter")
	// ErrOpen means a circuit breaker is open (or half-open with every probe
	// slot taken) and the call was not made.
	ErrOpen = errors.New("limit: circuit breaker is open")
)

// Reason says why a request was rejected. The vocabulary is fixed so it can
// be used as a metric label and in problem documents.
type Reason uint8

// Reasons.
const (
	ReasonNone         Reason = iota // admitted
	ReasonRate                       // "rate_limited": token bucket, GCRA, sliding window
	ReasonConcurrency                // "concurrency_limited": concurrency, adaptive
	ReasonBreakerOpen                // "breaker_open"
	ReasonThrottled                  // "throttled": client-side adaptive throttling
	ReasonOverloaded                 // "overloaded": system protection (CPU and in-flight)
	ReasonQueueTimeout               // "queue_timeout": a waiter sat too long in a CoDel queue

	// NumReasons bounds the vocabulary, for arrays indexed by Reason.
	NumReasons = iota
)

var reasonNames = [NumReasons]string{"", "rate_limited", "concurrency_limited", "breaker_open", "throttled", "overloaded", "queue_timeout"}

func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return "unknown"
}

// Decision is the answer to one admission. It is a small value and never
// allocates.
type Decision struct {
	// OK reports whether the request is admitted.
	OK bool
	// Wait is, for an admitted GCRA request, how long the caller should wait
	// before proceeding. It is zero for every other kind.
	Wait time.Duration
	// RetryAfter is, for a rejected request, the earliest time from now at
	// which the same request could be admitted (zero when unknown).
	RetryAfter time.Duration
	// Reason is ReasonNone when OK and says why otherwise.
	Reason Reason
}

// Pass applies a rule mode to the decision: in shadow mode every request
// passes and wouldReject reports what enforcement would have done.
func (d Decision) Pass(mode string) (pass, wouldReject bool) {
	if d.OK {
		return true, false
	}
	return mode == wire.ModeShadow, true
}

// Err returns nil for an admitted request, ErrOpen for an open breaker and
// ErrLimited otherwise.
func (d Decision) Err() error {
	switch {
	case d.OK:
		return nil
	case d.Reason == ReasonBreakerOpen:
		return ErrOpen
	default:
		return ErrLimited
	}
}

// Permit is what an admission hands out. Finish it exactly once with Done
// when the guarded work ends; the zero Permit (rate kinds, rejections) is a
// no-op. Permits are values and never allocate.
type Permit struct {
	r     releaser
	start int64  // clock reading at admission, when the kind needs latency
	tag   uint64 // kind-specific (breaker: state and generation)
}

type releaser interface {
	release(p Permit, failed bool)
	isFailure(err error) bool
}

// Done finishes the permit; err is classified by the limiter (the breaker
// applies its IsFailure hook, the others treat any non-nil err as failure).
func (p Permit) Done(err error) {
	if p.r != nil {
		p.r.release(p, p.r.isFailure(err))
	}
}

// Finish finishes the permit with an outcome decided by the caller, for
// layers that judge success themselves (an HTTP status, say).
func (p Permit) Finish(ok bool) {
	if p.r != nil {
		p.r.release(p, !ok)
	}
}

func defaultIsFailure(err error) bool { return err != nil }
