package limit_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/switchyard-io/switchyard/sdk/limit"
	"github.com/switchyard-io/switchyard/sdk/wire"
)

// A limiter built from a published rule; shadow mode lets everything through
// and reports what would have been rejected.
func ExampleNew() {
	r := &wire.LimitRule{App: "checkout", Resource: "POST /orders", Kind: wire.KindTokenBucket,
		Mode: wire.ModeShadow, Scope: wire.ScopeInstance, Rate: 1, Burst: 2}
	l, err := limit.New(r, limit.NewFakeClock())
	if err != nil {
		panic(err)
	}
	for range 3 {
		p, d := l.Admit()
		pass, wouldReject := d.Pass(r.Mode)
		fmt.Println(pass, wouldReject, d.Reason, d.RetryAfter)
		p.Done(nil)
	}
	// Output:
	// true false  0s
	// true false  0s
	// true true rate_limited 1s
}

func ExampleBreaker_Do() {
	clock := limit.NewFakeClock()
	b := limit.NewBreaker(limit.BreakerConfig{ErrorRate: 0.5, MinRequests: 2, Window: 10 * time.Second,
		OpenDuration: time.Second, MaxOpenDuration: time.Minute, HalfOpenProbes: 1}, clock)
	down := errors.New("db down")
	for range 3 {
		err := b.Do(func() error { return down })
		fmt.Println(err, b.State())
	}
	clock.Advance(time.Second)
	fmt.Println(b.Do(func() error { return nil }), b.State())
	// Output:
	// db down closed
	// db down open
	// limit: circuit breaker is open open
	// <nil> closed
}
