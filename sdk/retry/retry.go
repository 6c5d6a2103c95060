package retry

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/switchyard-io/switchyard/sdk/limit"
)

// Defaults of a Policy and a Budget.
const (
	DefaultMaxAttempts = 3
	DefaultBaseDelay   = 100 * time.Millisecond
	DefaultMaxDelay    = 2 * time.Second
	DefaultBudgetRatio = 0.1
	DefaultBudgetSpan  = 10 * time.Second
)

// ErrBudgetExhausted is joined to the last error when a retry was due but
// the budget had none left.
var ErrBudgetExhausted = errors.New("retry: budget exhausted")

// Budget caps retries at ratio × the requests seen over a sliding window
// (ten buckets). One Budget is meant to be shared by every caller of one
// dependency. It is safe for concurrent use.
type Budget struct {
	mu    sync.Mutex
	ratio float64
	ring  *limit.Rolling // counter 0: requests, 1: retries
	clock limit.Clock
}

// NewBudget returns a budget; ratio ≤ 0 means DefaultBudgetRatio, window ≤ 0
// DefaultBudgetSpan, a nil clock limit.SystemClock.
func NewBudget(ratio float64, window time.Duration, clock limit.Clock) *Budget {
	if ratio <= 0 {
		ratio = DefaultBudgetRatio
	}
	if window <= 0 {
		window = DefaultBudgetSpan
	}
	if clock == nil {
		clock = limit.SystemClock
	}
	return &Budget{ratio: ratio, ring: limit.NewRolling(window/10, 10), clock: clock}
}

// Request records one logical request (not a retry).
func (b *Budget) Request() {
	b.mu.Lock()
	b.ring.Add(b.clock.Nanotime(), 0, 1)
	b.mu.Unlock()
}

// TryRetry takes one retry from the budget if retries would stay within
// ratio × requests in the window.
func (b *Budget) TryRetry() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock.Nanotime()
	s := b.ring.Sum(now)
	if float64(s[1]+1) > b.ratio*float64(s[0]) {
		return false
	}
	b.ring.Add(now, 1, 1)
	return true
}

// Policy says how to retry. The zero Policy is usable: three attempts,
// 100 ms base delay, 2 s cap, no budget.
type Policy struct {
	MaxAttempts int           // attempts including the first
	BaseDelay   time.Duration // ceiling of the first backoff
	MaxDelay    time.Duration // cap of the backoff ceiling
	Budget      *Budget       // nil: no budget
	// Retryable further narrows which errors are retried; the never-retried
	// errors (see Retryable) are excluded before it is asked.
	Retryable func(error) bool
	// Sleep waits d or until ctx ends; nil uses a timer.
	Sleep func(ctx context.Context, d time.Duration) error
	// Rand returns a uniform int64 in [0, n); nil uses math/rand/v2.
	Rand func(n int64) int64
}

// Do runs op until it succeeds, returns an error that must not be retried,
// runs out of attempts or budget, or ctx ends while waiting. It returns nil
// or op's last error (joined with ErrBudgetExhausted when the budget stopped
// it).
func Do(ctx context.Context, p Policy, op func(ctx context.Context) error) error {
	p.defaults()
	if p.Budget != nil {
		p.Budget.Request()
	}
	for attempt := 0; ; attempt++ {
		err := op(ctx)
		if err == nil {
			return nil
		}
		if attempt+1 >= p.MaxAttempts || !Retryable(ctx, err) || (p.Retryable != nil && !p.Retryable(err)) {
			return err
		}
		if p.Budget != nil && !p.Budget.TryRetry() {
			return fmt.Errorf("%w: %w", ErrBudgetExhausted, err)
		}
		if p.Sleep(ctx, Backoff(p.BaseDelay, p.MaxDelay, attempt, p.Rand)) != nil {
			return err
		}
	}
}

// DoWithBreaker runs the whole retry loop as one call through b: the call
// counts once in the breaker, and an open breaker returns limit.ErrOpen
// before the first attempt.
func DoWithBreaker(ctx context.Context, b *limit.Breaker, p Policy, op func(ctx context.Context) error) error {
	return b.Do(func() error { return Do(ctx, p, op) })
}

// Retryable reports whether err may be retried at all: not a limiter
// rejection, an open breaker, a Permanent error, nor a context error (of err
// or of ctx).
func Retryable(ctx context.Context, err error) bool {
	var perm *permanent
	switch {
	case ctx.Err() != nil,
		errors.Is(err, limit.ErrLimited),
		errors.Is(err, limit.ErrOpen),
		errors.Is(err, context.Canceled),
		errors.Is(err, context.DeadlineExceeded),
		errors.As(err, &perm):
		return false
	}
	return true
}

type permanent struct{ err error }

func (p *permanent) Error() string { return p.err.Error() }
func (p *permanent) Unwrap() error { return p.err }

// Permanent marks err as not worth retrying; errors.Is and errors.As still
// see through it.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanent{err}
}

// Backoff is exponential backoff with full jitter: a uniform delay in
// [0, min(maxDelay, base × 2^attempt)], attempt counting from 0. rnd returns a
// uniform int64 in [0, n); nil uses math/rand/v2.
func Backoff(base, maxDelay time.Duration, attempt int, rnd func(n int64) int64) time.Duration {
	if rnd == nil {
		rnd = rand.Int64N
	}
	ceiling := maxDelay
	if attempt < 62 && base > 0 && base <= maxDelay>>attempt {
		ceiling = base << attempt
	}
	return time.Duration(rnd(int64(ceiling) + 1))
}

func (p *Policy) defaults() {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = DefaultMaxAttempts
	}
	if p.BaseDelay <= 0 {
		p.BaseDelay = DefaultBaseDelay
	}
	if p.MaxDelay <= 0 {
		p.MaxDelay = DefaultMaxDelay
	}
	p.MaxDelay = max(p.MaxDelay, p.BaseDelay)
	if p.Sleep == nil {
		p.Sleep = limit.Sleep
	}
}
