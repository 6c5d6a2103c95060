package grpcx_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/switchyard-io/switchyard/sdk"
	"github.com/switchyard-io/switchyard/sdk/grpcx"
	"github.com/switchyard-io/switchyard/sdk/limit"
	"github.com/switchyard-io/switchyard/sdk/wire"
)

// drain counts the calls that reached the probe's handlers.
func (e *env) drain(t *testing.T) func() int {
	t.Helper()
	n := make(chan int)
	stop := make(chan struct{})
	go func() {
		count := 0
		for {
			select {
			case <-e.seen:
				count++
			case n <- count:
			case <-stop:
				return
			}
		}
	}()
	t.Cleanup(func() { close(stop) })
	return func() int { return <-n }
}

func TestClientInterceptorThrottlesAFailingBackend(t *testing.T) {
	e := setup(t)
	calls := e.drain(t)
	clock := limit.NewFakeClock()
	l := e.c.Limiter("probe-backend", sdk.LimitClock(clock))
	r := wire.LimitRule{App: app, Resource: "probe-backend", Kind: wire.KindThrottle, Mode: wire.ModeEnforce,
		Scope: wire.ScopeInstance, MinRequests: 10, Version: 1}
	e.put(t, wire.LimitKey(ns, app, r.Resource), r)
	waitFor(t, "rule", func() bool { return l.Rule() != nil })

	ic := grpcx.UnaryClientInterceptor(e.c, grpcx.ClientOptions{Resource: func(string) string { return "probe-backend" }})
	invoke := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
		return cc.Invoke(ctx, method, req, reply, opts...)
	}
	const n = 200
	throttled := 0
	for range n {
		clock.Advance(10 * time.Millisecond)
		err := ic(context.Background(), "/test.Probe/Check", &healthpb.HealthCheckRequest{Service: "fail"}, new(healthpb.HealthCheckResponse), e.conn, invoke)
		switch {
		case status.Code(err) == codes.Unavailable && status.Convert(err).Message() == "switchyard: throttled":
			throttled++
		case status.Code(err) != codes.Internal:
			t.Fatalf("call: %v", err)
		}
	}
	if got := calls(); got > 30 || got+throttled != n {
		t.Errorf("backend got %d of %d calls (%d throttled), want at most 30", got, n, throttled)
	}
}

func TestCriticalityTravelsInMetadata(t *testing.T) {
	e := setup(t)
	e.drain(t)
	// Server side: a bucket of 10 tokens that refills too slowly to
	// matter, with a reserve that leaves sheddable calls 1 token.
	r := wire.LimitRule{App: app, Resource: "/test.Probe/Check", Kind: wire.KindTokenBucket, Mode: wire.ModeEnforce,
		Scope: wire.ScopeInstance, Rate: 0.001, Burst: 10, Overload: wire.Overload{Reserve: 0.45}, Version: 1}
	e.put(t, wire.LimitKey(ns, app, r.Resource), r)
	l := e.c.Limiter(r.Resource)
	waitFor(t, "rule", func() bool { return l.Rule() != nil })

	ic := grpcx.UnaryClientInterceptor(e.c, grpcx.ClientOptions{Resource: func(string) string { return "no-rule" }})
	invoke := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, opts ...grpc.CallOption) error {
		return cc.Invoke(ctx, method, req, reply, opts...)
	}
	call := func(ctx context.Context) error {
		return ic(ctx, "/test.Probe/Check", &healthpb.HealthCheckRequest{}, new(healthpb.HealthCheckResponse), e.conn, invoke)
	}
	shed := sdk.WithCriticality(context.Background(), sdk.Sheddable)
	if err := call(shed); err != nil {
		t.Fatalf("first sheddable call: %v", err)
	}
	if err := call(shed); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("second sheddable call: %v, want ResourceExhausted (the server kept the rest for critical calls)", err)
	}
	for i := range 9 {
		if err := call(context.Background()); err != nil {
			t.Fatalf("critical call %d: %v", i, err)
		}
	}
}
