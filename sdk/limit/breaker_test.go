package limit_test

import (
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/sdk/limit"
)

var (
	errDown     = errors.New("dependency down")
	errNotFound = errors.New("not found") // a business error
)

func testBreaker(clock limit.Clock, edit func(c *limit.BreakerConfig)) *limit.Breaker {
	c := limit.BreakerConfig{
		ErrorRate: 0.5, MinRequests: 10, Window: 10 * time.Second,
		OpenDuration: time.Second, MaxOpenDuration: 8 * time.Second, HalfOpenProbes: 1,
	}
	if edit != nil {
		edit(&c)
	}
	return limit.NewBreaker(c, clock)
}

func fail() error    { return errDown }
func succeed() error { return nil }

// callN makes n calls through b and reports how many ran.
func callN(b *limit.Breaker, n int, fn func() error) (ran int) {
	for range n {
		_ = b.Do(func() error { ran++; return fn() })
	}
	return ran
}

func TestBreakerMinRequests(t *testing.T) {
	clock := limit.NewFakeClock()
	b := testBreaker(clock, nil)
	callN(b, 9, fail) // 100 % failures but only 9 calls
	if b.State() != limit.StateClosed {
		t.Fatalf("opened with 9 calls below min_requests 10")
	}
	callN(b, 1, fail)
	if b.State() != limit.StateOpen {
		t.Fatalf("state %v after 10 failures, want open", b.State())
	}
	if err := b.Do(succeed); !errors.Is(err, limit.ErrOpen) {
		t.Fatalf("Do on open breaker = %v, want ErrOpen", err)
	}
}

func TestBreakerErrorRateThreshold(t *testing.T) {
	tests := []struct {
		name     string
		ok, bad  int
		wantOpen bool
	}{
		{"below", 11, 9, false},
		{"at threshold", 10, 10, true},
		{"above", 2, 18, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := testBreaker(limit.NewFakeClock(), nil)
			callN(b, tc.ok, succeed)
			callN(b, tc.bad, fail)
			if open := b.State() == limit.StateOpen; open != tc.wantOpen {
				t.Fatalf("open = %v, want %v (counts %+v)", open, tc.wantOpen, b.Counts())
			}
		})
	}
}

func TestBreakerWindowForgetsOldFailures(t *testing.T) {
	clock := limit.NewFakeClock()
	b := testBreaker(clock, nil)
	callN(b, 9, fail)
	clock.Advance(11 * time.Second) // the failures leave the window
	callN(b, 9, succeed)
	callN(b, 1, fail)
	if b.State() != limit.StateClosed {
		t.Fatalf("opened on failures older than the window (counts %+v)", b.Counts())
	}
}

func TestBreakerIsFailureHook(t *testing.T) {
	b := testBreaker(limit.NewFakeClock(), func(c *limit.BreakerConfig) {
		c.IsFailure = func(err error) bool { return err != nil && !errors.Is(err, errNotFound) }
	})
	callN(b, 50, func() error { return errNotFound })
	if b.State() != limit.StateClosed || b.Counts().Failures != 0 {
		t.Fatalf("business errors counted as failures: state %v counts %+v", b.State(), b.Counts())
	}
	if err := b.Do(func() error { return errNotFound }); !errors.Is(err, errNotFound) {
		t.Fatalf("Do did not return fn's error: %v", err)
	}
}

func TestBreakerSlowCalls(t *testing.T) {
	clock := limit.NewFakeClock()
	b := testBreaker(clock, func(c *limit.BreakerConfig) {
		c.ErrorRate, c.SlowCallRate, c.SlowCallDuration = 0, 0.3, 500*ms
	})
	slow := func() error { clock.Advance(600 * ms); return nil }
	fast := func() error { clock.Advance(10 * ms); return nil }
	callN(b, 8, fast)
	callN(b, 2, slow) // 20 % slow
	if b.State() != limit.StateClosed {
		t.Fatalf("opened at 20%% slow calls, threshold 30%%")
	}
	callN(b, 1, slow) // 3 of 11 = 27 %
	callN(b, 1, slow) // 4 of 12 = 33 %
	if b.State() != limit.StateOpen {
		t.Fatalf("state %v at 33%% slow calls, want open (counts %+v)", b.State(), b.Counts())
	}
}

func TestBreakerGrowingOpenDuration(t *testing.T) {
	clock := limit.NewFakeClock()
	b := testBreaker(clock, nil)
	callN(b, 10, fail)
	// Each failed half-open probe doubles the open period, capped at 8 s.
	for i, want := range []time.Duration{1, 2, 4, 8, 8} {
		want *= time.Second
		if got := b.RetryAfter(); got != want {
			t.Fatalf("open period %d = %v, want %v", i, got, want)
		}
		clock.Advance(want - ms)
		if err := b.Do(succeed); !errors.Is(err, limit.ErrOpen) {
			t.Fatalf("period %d: call 1ms before the end was let through", i)
		}
		clock.Advance(ms)
		if ran := callN(b, 1, fail); ran != 1 {
			t.Fatalf("period %d: no probe admitted after the open period", i)
		}
		if b.State() != limit.StateOpen {
			t.Fatalf("period %d: failed probe left state %v", i, b.State())
		}
	}
	// A successful probe closes it and resets the period.
	clock.Advance(8 * time.Second)
	callN(b, 1, succeed)
	if b.State() != limit.StateClosed {
		t.Fatalf("state %v after a successful probe, want closed", b.State())
	}
	callN(b, 10, fail)
	if got := b.RetryAfter(); got != time.Second {
		t.Fatalf("open period after closing = %v, want the base 1s", got)
	}
}

func TestBreakerHalfOpenProbesSingleFlight(t *testing.T) {
	const probes = 3
	clock := limit.NewFakeClock()
	var transitions []string
	var mu sync.Mutex
	b := testBreaker(clock, func(c *limit.BreakerConfig) {
		c.HalfOpenProbes = probes
		c.OnStateChange = func(from, to limit.State) {
			mu.Lock()
			transitions = append(transitions, from.String()+">"+to.String())
			mu.Unlock()
		}
	})
	callN(b, 10, fail)
	clock.Advance(time.Second)

	// 64 goroutines race for the probe slots while the probes are in flight.
	var admitted, rejected atomic.Int64
	release := make(chan struct{})
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			err := b.Do(func() error {
				admitted.Add(1)
				<-release
				return nil
			})
			if errors.Is(err, limit.ErrOpen) {
				rejected.Add(1)
			}
		})
	}
	for admitted.Load()+rejected.Load() < 64 && rejected.Load() < 64-probes {
		runtime.Gosched() // wait for the goroutines to reach Do
	}
	if b.State() != limit.StateHalfOpen {
		t.Fatalf("state %v while probes run, want half_open", b.State())
	}
	close(release)
	wg.Wait()
	if admitted.Load() != probes || rejected.Load() != 64-probes {
		t.Fatalf("admitted %d probes (rejected %d), want exactly %d", admitted.Load(), rejected.Load(), probes)
	}
	if b.State() != limit.StateClosed {
		t.Fatalf("state %v after %d successful probes, want closed", b.State(), probes)
	}
	want := []string{"closed>open", "open>half_open", "half_open>closed"}
	if len(transitions) != len(want) {
		t.Fatalf("transitions %v, want %v", transitions, want)
	}
	for i := range want {
		if transitions[i] != want[i] {
			t.Fatalf("transitions %v, want %v", transitions, want)
		}
	}
}

func TestBreakerStaleOutcomesIgnored(t *testing.T) {
	clock := limit.NewFakeClock()
	b := testBreaker(clock, nil)
	p, err := b.Allow() // admitted while closed …
	if err != nil {
		t.Fatal(err)
	}
	callN(b, 10, fail)
	clock.Advance(time.Second)
	q, err := b.Allow() // … the probe of the next half-open period
	if err != nil {
		t.Fatal(err)
	}
	p.Done(nil) // the old call's success must not close the breaker
	if b.State() != limit.StateHalfOpen {
		t.Fatalf("stale success moved state to %v", b.State())
	}
	q.Done(nil)
	if b.State() != limit.StateClosed {
		t.Fatalf("probe success left state %v", b.State())
	}
}

func TestBreakerPanicCountsAsFailure(t *testing.T) {
	b := testBreaker(limit.NewFakeClock(), func(c *limit.BreakerConfig) { c.MinRequests = 1 })
	func() {
		defer func() { _ = recover() }()
		_ = b.Do(func() error { panic("boom") })
	}()
	if b.State() != limit.StateOpen {
		t.Fatalf("state %v after a panicking call, want open", b.State())
	}
}

func TestBreakerSetConfigKeepsState(t *testing.T) {
	clock := limit.NewFakeClock()
	b := testBreaker(clock, nil)
	callN(b, 10, fail)
	b.SetConfig(limit.BreakerConfig{ErrorRate: 0.9, MinRequests: 100, Window: 10 * time.Second,
		OpenDuration: time.Second, HalfOpenProbes: 1})
	if b.State() != limit.StateOpen {
		t.Fatalf("threshold change reset state to %v", b.State())
	}
	clock.Advance(time.Second)
	callN(b, 1, succeed)
	callN(b, 5, fail)
	b.SetConfig(limit.BreakerConfig{ErrorRate: 0.9, MinRequests: 100, Window: 10 * time.Second,
		OpenDuration: time.Second, HalfOpenProbes: 1})
	if got := b.Counts().Failures; got != 5 {
		t.Fatalf("failures after a threshold-only change = %d, want 5 kept", got)
	}
}

func TestBreakerAdmitDecision(t *testing.T) {
	clock := limit.NewFakeClock()
	b := testBreaker(clock, nil)
	callN(b, 10, fail)
	clock.Advance(300 * ms)
	_, d := b.Admit()
	if d.OK || d.Reason != limit.ReasonBreakerOpen || d.RetryAfter != 700*ms || !errors.Is(d.Err(), limit.ErrOpen) {
		t.Fatalf("Admit on open breaker = %+v", d)
	}
}

// TestBreakerOpenDurationSaturates: however many probes fail in a row, the
// open period grows to the cap and stays there (a doubling by shift used to
// overflow and wrap back to a few seconds after 32 trips).
func TestBreakerOpenDurationSaturates(t *testing.T) {
	clock := limit.NewFakeClock()
	b := testBreaker(clock, func(c *limit.BreakerConfig) {
		c.OpenDuration, c.MaxOpenDuration = 1<<32+1, time.Hour // ≈ 4.3 s
	})
	callN(b, 10, fail)
	prev := time.Duration(0)
	for i := range 80 {
		got := b.RetryAfter()
		if got < prev || got > time.Hour {
			t.Fatalf("open period %d = %v after %v, want non-decreasing up to 1h", i, got, prev)
		}
		prev = got
		clock.Advance(got)
		if ran := callN(b, 1, fail); ran != 1 {
			t.Fatalf("period %d: no probe admitted after the open period", i)
		}
	}
	if prev != time.Hour {
		t.Fatalf("open period after 80 failed probes = %v, want the 1h cap", prev)
	}
}

// TestBreakerSlowCallsEnabledLive: turning slow-call tracking on by a rule
// update must not count the calls already in flight (their start was not
// measured) as slow.
func TestBreakerSlowCallsEnabledLive(t *testing.T) {
	clock := limit.NewFakeClock()
	clock.Advance(time.Hour) // a process that has been up a while
	b := testBreaker(clock, func(c *limit.BreakerConfig) { c.MinRequests = 5 })
	var inflight []limit.Permit
	for range 5 {
		p, err := b.Allow()
		if err != nil {
			t.Fatal(err)
		}
		inflight = append(inflight, p)
	}
	b.SetConfig(limit.BreakerConfig{ErrorRate: 0.5, SlowCallRate: 0.5, SlowCallDuration: time.Second,
		MinRequests: 5, Window: 10 * time.Second, OpenDuration: time.Second, HalfOpenProbes: 1})
	clock.Advance(10 * ms)
	for _, p := range inflight {
		p.Done(nil)
	}
	if c := b.Counts(); c.Slow != 0 || b.State() != limit.StateClosed {
		t.Fatalf("5 calls of unknown duration counted %d slow, state %v; want 0 slow, closed", c.Slow, b.State())
	}
}

// TestBreakerHungProbeTimesOut: a probe that never returns must not hold
// the breaker half-open (rejecting everything) for ever: past the probe
// timeout the trial counts as failed, the breaker reopens for a longer
// period, and the next trial can close it. The hung probe's late outcome is
// ignored.
func TestBreakerHungProbeTimesOut(t *testing.T) {
	clock := limit.NewFakeClock()
	b := testBreaker(clock, nil) // window 10 s, open 1 s, 1 probe
	callN(b, 10, fail)
	clock.Advance(time.Second)
	hung, err := b.Allow()
	if err != nil || b.State() != limit.StateHalfOpen {
		t.Fatalf("no probe after the open period: %v, %v", err, b.State())
	}
	clock.Advance(9 * time.Second)
	if _, err := b.Allow(); err == nil || b.State() != limit.StateHalfOpen {
		t.Fatalf("before the probe timeout: err %v, state %v; want rejected, half-open", err, b.State())
	}
	clock.Advance(time.Second) // 10 s: the probe timeout (the window)
	if _, err := b.Allow(); err == nil || b.State() != limit.StateOpen {
		t.Fatalf("after the probe timeout: err %v, state %v; want rejected, open", err, b.State())
	}
	if got := b.RetryAfter(); got != 2*time.Second {
		t.Fatalf("open period after a hung trial = %v, want 2s (doubled)", got)
	}
	clock.Advance(2 * time.Second)
	if ran := callN(b, 1, func() error { return nil }); ran != 1 || b.State() != limit.StateClosed {
		t.Fatalf("second trial: ran %d, state %v; want a probe that closes it", ran, b.State())
	}
	hung.Done(errors.New("finally failed"))
	if b.State() != limit.StateClosed {
		t.Fatalf("the hung probe's late failure changed the state to %v", b.State())
	}
}
