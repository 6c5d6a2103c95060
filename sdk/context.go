package sdk

import (
	"context"

	"github.com/switchyard-io/switchyard/sdk/wire"
)

type keyCtxKey struct{}

type degradedCtxKey struct{}

// WithKey returns a context carrying the request key (a tenant, user or
// session id) that switches with stickiness "key" hash to pick members.
func WithKey(ctx context.Context, key string) context.Context {
	return context.WithValue(ctx, keyCtxKey{}, key)
}

// KeyFrom returns the request key set with WithKey.
func KeyFrom(ctx context.Context) (string, bool) {
	k, ok := ctx.Value(keyCtxKey{}).(string)
	return k, ok
}

// WithDegraded marks ctx as being served at a degradation level, so code
// further down can take the fast path without checking switches again.
func WithDegraded(ctx context.Context, level wire.Level) context.Context {
	return context.WithValue(ctx, degradedCtxKey{}, level)
}

// DegradedLevel returns the level set with WithDegraded, or "" when the
// request is not degraded.
func DegradedLevel(ctx context.Context) wire.Level {
	l, _ := ctx.Value(degradedCtxKey{}).(wire.Level)
	return l
}
