package sdk

import (
	"context"

	"github.com/switchyard-io/switchyard/sdk/limit"
)

// Criticality is how much a request matters when there is not enough
// capacity for all: limit.Critical (the default), limit.Degradable or
// limit.Sheddable. Rules with a reserve shed the lowest first.
type Criticality = limit.Criticality

// Criticalities, re-exported so services need not import sdk/limit.
const (
	Critical   = limit.Critical
	Degradable = limit.Degradable
	Sheddable  = limit.Sheddable
)

// CriticalityHeader is the default request header (and gRPC metadata key)
// carrying a request's criticality: "critical", "degradable" or
// "sheddable". The guards read it on the way in; the SDK's outbound
// wrappers (RoundTripper, grpcx.UnaryClientInterceptor) set it on the way
// out, so a call chain keeps the criticality its entry point gave it.
const CriticalityHeader = "X-Criticality"

type criticalityCtxKey struct{}

// WithCriticality returns a context carrying the request's criticality; it
// wins over a criticality header.
func WithCriticality(ctx context.Context, c Criticality) context.Context {
	return context.WithValue(ctx, criticalityCtxKey{}, c)
}

// CriticalityFrom returns the criticality set with WithCriticality (or read
// from a request header by a guard); ok is false when none was set, and the
// request then counts as Critical.
func CriticalityFrom(ctx context.Context) (c Criticality, ok bool) {
	c, ok = ctx.Value(criticalityCtxKey{}).(Criticality)
	return c, ok
}

// criticality is the criticality a limiter judges the request by.
func criticality(ctx context.Context) Criticality {
	c, _ := CriticalityFrom(ctx)
	return c
}

// criticalityIn reads the context's criticality, or the header's; when the
// header supplied it, the returned context carries it on.
func criticalityIn(ctx context.Context, h Headers, header string) context.Context {
	if _, ok := CriticalityFrom(ctx); ok || h == nil || header == "" {
		return ctx
	}
	if c, ok := limit.ParseCriticality(h.Get(header)); ok {
		return WithCriticality(ctx, c)
	}
	return ctx
}
