package limit_test

import (
	"errors"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/sdk/limit"
	"github.com/switchyard-io/switchyard/sdk/wire"
)

func TestNewEveryKind(t *testing.T) {
	rules := map[string]func(r *wire.LimitRule){
		wire.KindTokenBucket:   func(r *wire.LimitRule) { r.Rate, r.Burst = 1, 1 },
		wire.KindSlidingWindow: func(r *wire.LimitRule) { r.Limit, r.Window = 1, wire.Duration(time.Second) },
		wire.KindConcurrency:   func(r *wire.LimitRule) { r.Max = 1 },
		wire.KindGCRA:          func(r *wire.LimitRule) { r.Rate = 1 },
		wire.KindAdaptive:      func(r *wire.LimitRule) { r.Min, r.Max = 1, 2 },
		wire.KindBreaker: func(r *wire.LimitRule) {
			r.ErrorRate, r.MinRequests, r.Window = 0.5, 1, wire.Duration(time.Second)
			r.OpenDuration, r.HalfOpenProbes = wire.Duration(time.Second), 1
		},
		wire.KindThrottle: func(r *wire.LimitRule) {},
		wire.KindSystem:   func(r *wire.LimitRule) {},
	}
	for _, kind := range wire.LimitKinds {
		t.Run(kind, func(t *testing.T) {
			l, err := limit.New(rule(kind, rules[kind]), limit.NewFakeClock())
			if err != nil {
				t.Fatal(err)
			}
			if l.Kind() != kind {
				t.Fatalf("Kind() = %q", l.Kind())
			}
			p, d := l.Admit()
			if !d.OK {
				t.Fatalf("first Admit rejected: %+v", d)
			}
			p.Done(nil)
		})
	}
}

func TestNewRejectsInvalidRule(t *testing.T) {
	_, err := limit.New(rule(wire.KindTokenBucket, func(r *wire.LimitRule) { r.Rate = 1 }), nil)
	var fe *wire.FieldError
	if !errors.As(err, &fe) || fe.Field != "burst" {
		t.Fatalf("err = %v, want a field error naming burst", err)
	}
}

func TestUpdateKeepsStateOrStartsFresh(t *testing.T) {
	clock := limit.NewFakeClock()
	tb := rule(wire.KindTokenBucket, func(r *wire.LimitRule) { r.Rate, r.Burst = 1, 3 })
	l, err := limit.New(tb, clock)
	if err != nil {
		t.Fatal(err)
	}
	l.Admit()
	l.Admit()

	faster := *tb
	faster.Rate = 100
	l2, err := limit.Update(l, &faster, clock)
	if err != nil || l2 != l {
		t.Fatalf("same-kind update returned %v, %v; want the same limiter", l2, err)
	}
	if got := l.(*limit.TokenBucket).Tokens(); got != 1 {
		t.Fatalf("tokens after rate change = %v, want 1 kept", got)
	}

	bad := faster
	bad.Burst = 0
	if l3, err := limit.Update(l, &bad, clock); err == nil || l3 != l {
		t.Fatal("invalid update accepted or limiter replaced")
	}

	cc := rule(wire.KindConcurrency, func(r *wire.LimitRule) { r.Max = 2 })
	l4, err := limit.Update(l, cc, clock)
	if err != nil || l4.Kind() != wire.KindConcurrency {
		t.Fatalf("kind change: %v, %v", l4, err)
	}
	p, _ := l4.Admit()
	cc2 := *cc
	cc2.Max = 1
	if l5, _ := limit.Update(l4, &cc2, clock); l5.(*limit.Concurrency).InFlight() != 1 {
		t.Fatal("concurrency update lost the in-flight count")
	}
	if _, d := l4.Admit(); d.OK {
		t.Fatal("admitted above the lowered max")
	}
	p.Done(nil)
}

func TestDecisionPass(t *testing.T) {
	rejected := limit.Decision{Reason: limit.ReasonRate, RetryAfter: time.Second}
	tests := []struct {
		name              string
		d                 limit.Decision
		mode              string
		pass, wouldReject bool
	}{
		{"admitted enforce", limit.Decision{OK: true}, wire.ModeEnforce, true, false},
		{"admitted shadow", limit.Decision{OK: true}, wire.ModeShadow, true, false},
		{"rejected enforce", rejected, wire.ModeEnforce, false, true},
		{"rejected shadow", rejected, wire.ModeShadow, true, true},
	}
	for _, tc := range tests {
		pass, would := tc.d.Pass(tc.mode)
		if pass != tc.pass || would != tc.wouldReject {
			t.Errorf("%s: Pass = %v, %v; want %v, %v", tc.name, pass, would, tc.pass, tc.wouldReject)
		}
	}
	if !errors.Is(rejected.Err(), limit.ErrLimited) || (limit.Decision{OK: true}).Err() != nil {
		t.Error("Decision.Err does not map to the sentinels")
	}
	if limit.ReasonConcurrency.String() != "concurrency_limited" || limit.ReasonBreakerOpen.String() != "breaker_open" {
		t.Error("reason vocabulary changed")
	}
}
