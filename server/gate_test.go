package server

import (
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/sdk/wire"
)

// TestLoosens: which edits of a limit rule raise it (held on a protected
// app) and which lower it.
func TestLoosens(t *testing.T) {
	base := wire.LimitRule{Kind: wire.KindTokenBucket, Mode: wire.ModeEnforce, Scope: wire.ScopeInstance, Rate: 100, Burst: 10,
		Limit: 50, Window: wire.Duration(time.Second), OpenDuration: wire.Duration(time.Second)}
	for _, tc := range []struct {
		name string
		edit func(*wire.LimitRule)
		want bool
	}{
		{"nothing", func(*wire.LimitRule) {}, false},
		{"higher rate", func(r *wire.LimitRule) { r.Rate = 200 }, true},
		{"lower rate", func(r *wire.LimitRule) { r.Rate = 50 }, false},
		{"higher burst", func(r *wire.LimitRule) { r.Burst = 11 }, true},
		{"shorter window", func(r *wire.LimitRule) { r.Window = wire.Duration(time.Millisecond) }, true},
		{"longer window", func(r *wire.LimitRule) { r.Window = wire.Duration(time.Minute) }, false},
		{"shorter open period", func(r *wire.LimitRule) { r.OpenDuration = wire.Duration(time.Millisecond) }, true},
		{"enforce to shadow", func(r *wire.LimitRule) { r.Mode = wire.ModeShadow }, true},
		{"another kind", func(r *wire.LimitRule) { r.Kind = wire.KindConcurrency }, true},
		{"another scope", func(r *wire.LimitRule) { r.Scope = wire.ScopeCluster }, true},
		{"changed overload parameter", func(r *wire.LimitRule) { r.Reserve = 0.1 }, true},
		{"lower rate, lower burst", func(r *wire.LimitRule) { r.Rate, r.Burst = 10, 1 }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			after := base
			tc.edit(&after)
			b := base
			if got := loosens(&b, &after); got != tc.want {
				t.Fatalf("loosens = %v, want %v", got, tc.want)
			}
		})
	}
}
