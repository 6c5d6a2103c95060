package limit_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-kratos/aegis/circuitbreaker/sre"
	"github.com/go-kratos/aegis/ratelimit"
	"github.com/go-kratos/aegis/ratelimit/bbr"

	"github.com/switchyard-io/switchyard/sdk/limit"
)

// The overload levers against their anchors in the same run (make bench):
// the throttler against Kratos' SRE breaker (github.com/go-kratos/aegis
// circuitbreaker/sre, the same formula), system protection against Kratos'
// BBR (ratelimit/bbr), and the CoDel queue's admission against the plain
// concurrency limiter. Each op is one admission and its outcome, on a
// healthy backend; both sides read the real clock.

func BenchmarkThrottleAdmit(b *testing.B) {
	th := limit.NewThrottler(2, 10*time.Second, 100, nil)
	b.ReportAllocs()
	for b.Loop() {
		p, d := th.Admit()
		if !d.OK {
			b.Fatal("throttled")
		}
		p.Done(nil)
	}
}

func BenchmarkAegisSREAllow(b *testing.B) {
	br := sre.NewBreaker(sre.WithSuccess(0.5), sre.WithRequest(100), sre.WithWindow(10*time.Second))
	b.ReportAllocs()
	for b.Loop() {
		if err := br.Allow(); err != nil {
			b.Fatal(err)
		}
		br.MarkSuccess()
	}
}

func BenchmarkThrottleAdmitParallel(b *testing.B) {
	th := limit.NewThrottler(2, 10*time.Second, 100, nil)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			p, _ := th.Admit()
			p.Done(nil)
		}
	})
}

func BenchmarkAegisSREAllowParallel(b *testing.B) {
	br := sre.NewBreaker(sre.WithSuccess(0.5), sre.WithRequest(100), sre.WithWindow(10*time.Second))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_ = br.Allow()
			br.MarkSuccess()
		}
	})
}

// highCPU makes system protection take its overload path: the CPU is over
// the threshold, so every admission checks in-flight work against the
// Little's-law bound (Kratos' BBR with threshold 0 does the same).
type highCPU struct{}

func (highCPU) CPUUsage() float64 { return 1 }

func BenchmarkSystemAdmit(b *testing.B) {
	s := limit.NewSystem(0.8, 10*time.Second, time.Second, highCPU{}, nil)
	b.ReportAllocs()
	for b.Loop() {
		p, d := s.Admit()
		if !d.OK {
			b.Fatal("rejected")
		}
		p.Done(nil)
	}
}

func BenchmarkAegisBBRAllow(b *testing.B) {
	l := bbr.NewLimiter(bbr.WithCPUThreshold(0), bbr.WithWindow(10*time.Second), bbr.WithBucket(100))
	b.ReportAllocs()
	for b.Loop() {
		done, err := l.Allow()
		if err != nil {
			b.Fatal(err)
		}
		done(ratelimit.DoneInfo{})
	}
}

func BenchmarkSystemAdmitParallel(b *testing.B) {
	s := limit.NewSystem(0.8, 10*time.Second, time.Second, highCPU{}, nil)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if p, d := s.Admit(); d.OK {
				p.Done(nil)
			}
		}
	})
}

func BenchmarkAegisBBRAllowParallel(b *testing.B) {
	l := bbr.NewLimiter(bbr.WithCPUThreshold(0), bbr.WithWindow(10*time.Second), bbr.WithBucket(100))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if done, err := l.Allow(); err == nil {
				done(ratelimit.DoneInfo{})
			}
		}
	})
}

func BenchmarkCoDelAdmit(b *testing.B) {
	c := limit.NewCoDel(1<<20, 5*time.Millisecond, 100*time.Millisecond, true, nil)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		p, err := c.AcquireAs(ctx, limit.Critical)
		if err != nil {
			b.Fatal(err)
		}
		p.Done(nil)
	}
}

func BenchmarkConcurrencyAdmit(b *testing.B) {
	c := limit.NewConcurrency(1 << 20)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		p, err := c.Acquire(ctx)
		if err != nil {
			b.Fatal(err)
		}
		p.Done(nil)
	}
}
