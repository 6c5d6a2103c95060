package sdk

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestDedupeKeepsInFlightAndForgetsFailures: a full dedupe never drops a
// key whose Enqueue is still running (its duplicate must not enqueue
// again), and failed keys do not use up the capacity of successful ones.
func TestDedupeKeepsInFlightAndForgetsFailures(t *testing.T) {
	d := newDedupe(time.Hour, 2)
	waiting := make(chan string, 1)
	d.testHookWait = func(key string) { waiting <- key }
	ctx := context.Background()
	var calls atomic.Int32
	block := make(chan struct{})
	release := sync.OnceFunc(func() { close(block) })
	t.Cleanup(release) // a failed test must not leave "slow" blocked
	started := make(chan struct{})
	go d.do(ctx, "slow", func() error {
		calls.Add(1)
		close(started)
		<-block
		return nil
	})
	<-started
	// Fill past the cap while "slow" is in flight.
	for i := 0; i < 3; i++ {
		if err := d.do(ctx, fmt.Sprintf("k%d", i), func() error { calls.Add(1); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	dup := make(chan error, 1)
	go func() { dup <- d.do(ctx, "slow", func() error { calls.Add(1); return nil }) }()
	select {
	case key := <-waiting:
		if key != "slow" {
			t.Fatalf("duplicate waits for %q", key)
		}
	case err := <-dup:
		t.Fatalf("duplicate returned %v while the first call was still running", err)
	case <-time.After(10 * time.Second):
		t.Fatal("duplicate did not wait for the in-flight call within 10s")
	}
	release()
	select {
	case err := <-dup:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("duplicate still waiting 10s after the first call finished")
	}
	if n := calls.Load(); n != 4 {
		t.Fatalf("enqueue called %d times, want 4 (the in-flight key once)", n)
	}

	// Failures are forgotten and leave the capacity to successes.
	d = newDedupe(time.Hour, 2)
	for i := 0; i < 10; i++ {
		_ = d.do(ctx, fmt.Sprintf("fail%d", i), func() error { return errors.New("queue down") })
	}
	calls.Store(0)
	for _, k := range []string{"a", "b", "a", "b"} {
		_ = d.do(ctx, k, func() error { calls.Add(1); return nil })
	}
	if n := calls.Load(); n != 2 {
		t.Fatalf("after failures, %d enqueues for 2 keys sent twice", n)
	}
}

// TestDedupeFailuresDoNotGrowOrder: while a remembered success holds the
// head of the order, an Enqueuer outage with a client retrying must not
// pile up the entries of its failed attempts.
func TestDedupeFailuresDoNotGrowOrder(t *testing.T) {
	d := newDedupe(time.Hour, 100)
	ctx := context.Background()
	_ = d.do(ctx, "ok", func() error { return nil })
	down := errors.New("queue down")
	for range 10_000 {
		_ = d.do(ctx, "retried", func() error { return down })
	}
	if len(d.m) != 1 || len(d.order) > 2*len(d.m)+17 {
		t.Fatalf("after 10,000 failed attempts: %d keys, %d ordered refs", len(d.m), len(d.order))
	}
	if err := d.do(ctx, "ok", func() error { t.Error("remembered key enqueued again"); return nil }); err != nil {
		t.Fatal(err)
	}
}
