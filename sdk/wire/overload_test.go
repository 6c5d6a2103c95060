package wire

import (
	"errors"
	"slices"
	"testing"
	"time"
)

func TestOverloadValidationNamesEveryField(t *testing.T) {
	base := func(kind string) LimitRule {
		return LimitRule{App: "checkout", Resource: "dep", Kind: kind, Mode: ModeEnforce, Scope: ScopeInstance}
	}
	good := []LimitRule{base(KindThrottle), base(KindSystem)}
	q := base(KindConcurrency)
	q.Max, q.QueueTarget, q.LIFO, q.Reserve, q.WarmUp = 4, Duration(5*time.Millisecond), true, 0.45, Duration(time.Minute)
	good = append(good, q)
	for _, r := range good {
		if err := r.Validate(); err != nil {
			t.Errorf("%s: %v", r.Kind, err)
		}
	}

	bad := base(KindThrottle)
	bad.K, bad.Window, bad.MinRequests, bad.Reserve, bad.Scope = 0.5, Duration(time.Millisecond), -1, 0.9, ScopeCluster
	bad.LIFO, bad.WarmUp = true, Duration(2*time.Hour)
	want := []string{"k", "window", "min_requests", "reserve", "scope", "lifo", "warm_up"}
	var got []string
	var joined interface{ Unwrap() []error }
	var walk func(error)
	walk = func(err error) {
		var fe *FieldError
		switch {
		case errors.As(err, &joined):
			for _, e := range joined.Unwrap() {
				walk(e)
			}
		case errors.As(err, &fe):
			got = append(got, fe.Field)
		}
	}
	walk(bad.Validate())
	for _, f := range want {
		if !slices.Contains(got, f) {
			t.Errorf("%s not named: %v", f, got)
		}
	}
}

func TestQueueDefaults(t *testing.T) {
	r := LimitRule{Kind: KindConcurrency}
	if _, _, ok := r.Queue(); ok {
		t.Fatal("a rule without queue_target queues")
	}
	r.QueueTarget = Duration(5 * time.Millisecond)
	if target, interval, ok := r.Queue(); !ok || target != 5*time.Millisecond || interval != DefaultQueueInterval {
		t.Fatalf("Queue() = %v, %v, %v; want 5ms, the default interval", target, interval, ok)
	}
	r.QueueTarget = Duration(80 * time.Millisecond)
	if _, interval, _ := r.Queue(); interval != 160*time.Millisecond {
		t.Fatalf("interval for an 80ms target = %v, want twice the target", interval)
	}
}
