package sdk

import (
	"context"
	"testing"

	"github.com/switchyard-io/switchyard/sdk/wire"
)

// benchLimiter is a Limiter of an offline client enforcing r. The rules
// match sdk/limit's benchmarks (BenchmarkTokenBucketAllow,
// BenchmarkBreakerDo), so the cost of the handle over the raw primitive
// shows in the same run.
func benchLimiter(b *testing.B, r wire.LimitRule) *Limiter {
	b.Helper()
	c, err := New(context.Background(), Config{Namespace: "bench", App: "checkout", InstanceID: "inst-7", Logger: discard})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	l := c.Limiter(r.Resource)
	c.apply([]kvUpdate{{key: wire.LimitKey("bench", r.App, r.Resource), value: []byte(mustJSON(b, r)), modRev: 1}}, true, 1, SourceLive)
	if l.Rule() == nil {
		b.Fatal("rule not applied")
	}
	return l
}

func benchTokenBucketRule() wire.LimitRule {
	r := rule("POST /orders", wire.KindTokenBucket)
	r.Rate, r.Burst = 1e9, 1<<20
	return r
}

func benchBreakerRule() wire.LimitRule {
	r := rule("payments", wire.KindBreaker)
	r.ErrorRate, r.SlowCallRate, r.SlowCallDuration = 0.5, 0.5, wire.Duration(1e9)
	r.MinRequests, r.Window, r.OpenDuration, r.MaxOpenDuration, r.HalfOpenProbes = 20, wire.Duration(10e9), wire.Duration(5e9), wire.Duration(60e9), 3
	return r
}

func BenchmarkLimiterAllow(b *testing.B) {
	l := benchLimiter(b, benchTokenBucketRule())
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if !l.Allow(ctx).OK {
			b.Fatal("rejected")
		}
	}
}

func BenchmarkLimiterAllowParallel(b *testing.B) {
	l := benchLimiter(b, benchTokenBucketRule())
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if !l.Allow(ctx).OK {
				b.Error("rejected")
				return
			}
		}
	})
}

// BenchmarkLimiterAllowNoRule is the cost of a handle whose resource has no
// published rule.
func BenchmarkLimiterAllowNoRule(b *testing.B) {
	c := newTestClient(b, Config{})
	l := c.Limiter("GET /unlimited")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if !l.Allow(ctx).OK {
			b.Fatal("rejected")
		}
	}
}

func nop(context.Context) error { return nil }

func BenchmarkLimiterBreakerDo(b *testing.B) {
	l := benchLimiter(b, benchBreakerRule())
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := l.Do(ctx, nop); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLimiterBreakerDoParallel(b *testing.B) {
	l := benchLimiter(b, benchBreakerRule())
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := l.Do(ctx, nop); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
