package retry_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/sdk/limit"
	"github.com/switchyard-io/switchyard/sdk/retry"
)

const ms = time.Millisecond

var errFlaky = errors.New("flaky")

// fakeSleep records the delays asked for and advances clock by them.
type fakeSleep struct {
	clock  *limit.FakeClock
	delays []time.Duration
}

func (f *fakeSleep) sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f.delays = append(f.delays, d)
	if f.clock != nil {
		f.clock.Advance(d)
	}
	return nil
}

func maxRand(n int64) int64 { return n - 1 }

// failing returns an op that fails n times with err, then succeeds.
func failing(n int, err error) (op func(context.Context) error, calls *int) {
	calls = new(int)
	return func(context.Context) error {
		*calls++
		if *calls <= n {
			return err
		}
		return nil
	}, calls
}

func TestBackoffFullJitter(t *testing.T) {
	tests := []struct {
		attempt int
		want    time.Duration // ceiling: what maxRand returns
	}{
		{0, 100 * ms}, {1, 200 * ms}, {2, 400 * ms}, {3, 800 * ms},
		{4, time.Second}, {10, time.Second}, {70, time.Second},
	}
	for _, tc := range tests {
		if got := retry.Backoff(100*ms, time.Second, tc.attempt, maxRand); got != tc.want {
			t.Errorf("attempt %d: ceiling %v, want %v", tc.attempt, got, tc.want)
		}
		if got := retry.Backoff(100*ms, time.Second, tc.attempt, func(int64) int64 { return 0 }); got != 0 {
			t.Errorf("attempt %d: floor %v, want 0", tc.attempt, got)
		}
	}
	for range 1000 { // the real source stays within [0, ceiling]
		if d := retry.Backoff(100*ms, time.Second, 2, nil); d < 0 || d > 400*ms {
			t.Fatalf("jittered delay %v outside [0, 400ms]", d)
		}
	}
}

func TestDoRetriesWithBackoff(t *testing.T) {
	fs := &fakeSleep{}
	op, calls := failing(2, errFlaky)
	err := retry.Do(context.Background(), retry.Policy{MaxAttempts: 3, BaseDelay: 50 * ms, MaxDelay: time.Second, Sleep: fs.sleep, Rand: maxRand}, op)
	if err != nil || *calls != 3 {
		t.Fatalf("err %v after %d calls, want success on the 3rd", err, *calls)
	}
	if fmt.Sprint(fs.delays) != "[50ms 100ms]" {
		t.Fatalf("delays %v, want [50ms 100ms]", fs.delays)
	}

	op, calls = failing(5, errFlaky)
	err = retry.Do(context.Background(), retry.Policy{MaxAttempts: 3, Sleep: fs.sleep}, op)
	if !errors.Is(err, errFlaky) || *calls != 3 {
		t.Fatalf("err %v after %d calls, want the last error after 3 attempts", err, *calls)
	}
}

func TestDoNeverRetries(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		ctx  context.Context
		err  error
	}{
		{"limiter rejection", context.Background(), fmt.Errorf("orders: %w", limit.ErrLimited)},
		{"open breaker", context.Background(), limit.ErrOpen},
		{"deadline", context.Background(), context.DeadlineExceeded},
		{"canceled error", context.Background(), context.Canceled},
		{"caller's context ended", cancelled, errFlaky},
		{"permanent", context.Background(), retry.Permanent(errFlaky)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs := &fakeSleep{}
			op, calls := failing(10, tc.err)
			err := retry.Do(tc.ctx, retry.Policy{MaxAttempts: 5, Sleep: fs.sleep}, op)
			if *calls != 1 || !errors.Is(err, tc.err) {
				t.Fatalf("%d calls, err %v; want one call returning %v", *calls, err, tc.err)
			}
		})
	}
}

func TestDoRetryableHook(t *testing.T) {
	fs := &fakeSleep{}
	op, calls := failing(10, errFlaky)
	_ = retry.Do(context.Background(), retry.Policy{MaxAttempts: 5, Sleep: fs.sleep,
		Retryable: func(err error) bool { return !errors.Is(err, errFlaky) }}, op)
	if *calls != 1 {
		t.Fatalf("%d calls, want 1: the hook said not retryable", *calls)
	}
}

func TestBudgetCapsRetriesAtTenPercent(t *testing.T) {
	clock := limit.NewFakeClock()
	budget := retry.NewBudget(0.1, 10*time.Second, clock)
	fs := &fakeSleep{}
	p := retry.Policy{MaxAttempts: 4, Budget: budget, Sleep: fs.sleep}

	var attempts, exhausted int
	for range 200 { // a dependency that always fails
		op, calls := failing(100, errFlaky)
		if err := retry.Do(context.Background(), p, op); errors.Is(err, retry.ErrBudgetExhausted) {
			exhausted++
			if !errors.Is(err, errFlaky) {
				t.Fatal("budget error lost the op's error")
			}
		}
		attempts += *calls
		clock.Advance(10 * ms)
	}
	// 200 requests in 2 s, all inside one window: at most 20 retries.
	if retries := attempts - 200; retries > 20 || retries < 19 {
		t.Fatalf("%d retries for 200 requests, want about 10%% (≤ 20)", retries)
	}
	if exhausted == 0 {
		t.Fatal("budget never reported exhaustion")
	}

	// Once the window has moved on, old requests no longer pay for retries.
	clock.Advance(20 * time.Second)
	if budget.TryRetry() {
		t.Fatal("retry allowed with no requests in the window")
	}
}

func TestSleepInterruptedByContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	op, calls := failing(10, errFlaky)
	err := retry.Do(ctx, retry.Policy{MaxAttempts: 5, Sleep: func(ctx context.Context, _ time.Duration) error {
		cancel()
		return ctx.Err()
	}}, op)
	if *calls != 1 || !errors.Is(err, errFlaky) {
		t.Fatalf("%d calls, err %v; want to stop when the context ends while waiting", *calls, err)
	}
}

func TestDoWithBreakerCountsOnce(t *testing.T) {
	clock := limit.NewFakeClock()
	b := limit.NewBreaker(limit.BreakerConfig{ErrorRate: 0.5, MinRequests: 2, Window: 10 * time.Second,
		OpenDuration: time.Second, HalfOpenProbes: 1}, clock)
	fs := &fakeSleep{}
	p := retry.Policy{MaxAttempts: 3, Sleep: fs.sleep}

	op, calls := failing(2, errFlaky) // two failed attempts, then success
	if err := retry.DoWithBreaker(context.Background(), b, p, op); err != nil || *calls != 3 {
		t.Fatalf("err %v after %d attempts", err, *calls)
	}
	if c := b.Counts(); c.Total != 1 || c.Failures != 0 {
		t.Fatalf("breaker counts %+v, want one successful call", c)
	}

	op, calls = failing(10, errFlaky) // all attempts fail: one failure
	_ = retry.DoWithBreaker(context.Background(), b, p, op)
	if c := b.Counts(); c.Total != 2 || c.Failures != 1 || *calls != 3 {
		t.Fatalf("breaker counts %+v after a failed call of %d attempts, want 2 total, 1 failure", c, *calls)
	}
	if b.State() != limit.StateOpen {
		t.Fatalf("breaker %v at 50%% failures, want open", b.State())
	}
	op, calls = failing(0, nil)
	if err := retry.DoWithBreaker(context.Background(), b, p, op); !errors.Is(err, limit.ErrOpen) || *calls != 0 {
		t.Fatalf("open breaker: err %v, %d attempts; want ErrOpen before any attempt", err, *calls)
	}
}
