package grpcx_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/switchyard-io/switchyard/internal/etcdtest"
	"github.com/switchyard-io/switchyard/sdk"
	"github.com/switchyard-io/switchyard/sdk/grpcx"
	"github.com/switchyard-io/switchyard/sdk/wire"
)

const ns, app = "test", "shop"

// probe is a hand-written service (health messages, no generated stubs)
// whose handlers report the degraded level they see.
func probeDesc(seen chan<- wire.Level) *grpc.ServiceDesc {
	return &grpc.ServiceDesc{
		ServiceName: "test.Probe",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "Check", Handler: func(srv any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
			in := new(healthpb.HealthCheckRequest)
			if err := dec(in); err != nil {
				return nil, err
			}
			h := func(ctx context.Context, req any) (any, error) {
				seen <- sdk.DegradedLevel(ctx)
				if req.(*healthpb.HealthCheckRequest).Service == "fail" {
					return nil, status.Error(codes.Internal, "boom")
				}
				return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
			}
			return ic(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: "/test.Probe/Check"}, h)
		}}},
		Streams: []grpc.StreamDesc{{StreamName: "CreateWatch", ServerStreams: true, Handler: func(srv any, ss grpc.ServerStream) error {
			in := new(healthpb.HealthCheckRequest)
			if err := ss.RecvMsg(in); err != nil {
				return err
			}
			seen <- sdk.DegradedLevel(ss.Context())
			return ss.SendMsg(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING})
		}}},
	}
}

type env struct {
	c    *sdk.Client
	reg  *prometheus.Registry
	etcd *clientv3.Client
	conn *grpc.ClientConn
	seen chan wire.Level
}

func setup(t *testing.T) *env {
	t.Helper()
	srv := etcdtest.Start(t)
	reg := prometheus.NewRegistry()
	c, err := sdk.New(context.Background(), sdk.Config{Endpoints: []string{srv.Endpoint}, Namespace: ns, App: app, LeaseTTL: 3 * time.Second, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	e := &env{c: c, reg: reg, etcd: srv.Client(t), seen: make(chan wire.Level, 16)}
	opts := grpcx.Options{Switches: []*sdk.Handle{c.Switch("db-readonly"), c.Switch("orders-queue")}}
	gs := grpc.NewServer(grpc.UnaryInterceptor(grpcx.UnaryServerInterceptor(c, opts)), grpc.StreamInterceptor(grpcx.StreamServerInterceptor(c, opts)))
	gs.RegisterService(probeDesc(e.seen), struct{}{})
	lis := bufconn.Listen(1 << 20)
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	e.conn, err = grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.conn.Close() })
	return e
}

func (e *env) put(t *testing.T, key string, v any) {
	t.Helper()
	b, _ := json.Marshal(v)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := e.etcd.Put(ctx, key, string(b)); err != nil {
		t.Fatal(err)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// degraded returns switchyard_sdk_degraded_requests_total{level, action}.
func (e *env) degraded(t *testing.T, level wire.Level, action string) float64 {
	t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "switchyard_sdk_degraded_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			if labels["level"] == string(level) && labels["action"] == action {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func (e *env) check(service string) (*metadata.MD, error) {
	var tr metadata.MD
	err := e.conn.Invoke(context.Background(), "/test.Probe/Check", &healthpb.HealthCheckRequest{Service: service}, new(healthpb.HealthCheckResponse), grpc.Trailer(&tr))
	return &tr, err
}

func (e *env) watch() error {
	s, err := e.conn.NewStream(context.Background(), &grpc.StreamDesc{ServerStreams: true}, "/test.Probe/CreateWatch")
	if err != nil {
		return err
	}
	if err := s.SendMsg(&healthpb.HealthCheckRequest{}); err != nil {
		return err
	}
	if err := s.CloseSend(); err != nil {
		return err
	}
	if err := s.RecvMsg(new(healthpb.HealthCheckResponse)); err != nil {
		return err
	}
	if err := s.RecvMsg(new(healthpb.HealthCheckResponse)); !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

func TestUnaryRateLimit(t *testing.T) {
	e := setup(t)
	r := wire.LimitRule{App: app, Resource: "/test.Probe/Check", Kind: wire.KindTokenBucket, Mode: wire.ModeEnforce,
		Scope: wire.ScopeInstance, Rate: 0.5, Burst: 1, Version: 1}
	e.put(t, wire.LimitKey(ns, app, r.Resource), r)
	l := e.c.Limiter(r.Resource)
	waitFor(t, "rule", func() bool { return l.Rule() != nil })
	if _, err := e.check(""); err != nil {
		t.Fatalf("first call: %v", err)
	}
	tr, err := e.check("")
	if status.Code(err) != codes.ResourceExhausted || status.Convert(err).Message() != "switchyard: rate_limited" {
		t.Fatalf("second call: %v", err)
	}
	if got := tr.Get("retry-after"); len(got) != 1 || got[0] != "2" {
		t.Errorf("retry-after trailer = %v, want [2]", got)
	}
	if got := tr.Get("switchyard-reason"); len(got) != 1 || got[0] != "rate_limited" {
		t.Errorf("reason trailer = %v", got)
	}
}

func TestBreakerOpenIsUnavailable(t *testing.T) {
	e := setup(t)
	r := wire.LimitRule{App: app, Resource: "/test.Probe/Check", Kind: wire.KindBreaker, Mode: wire.ModeEnforce, Scope: wire.ScopeInstance,
		ErrorRate: 0.5, MinRequests: 2, Window: wire.Duration(time.Minute), OpenDuration: wire.Duration(time.Minute), HalfOpenProbes: 1, Version: 1}
	e.put(t, wire.LimitKey(ns, app, r.Resource), r)
	l := e.c.Limiter(r.Resource)
	waitFor(t, "rule", func() bool { return l.Rule() != nil })
	for range 2 {
		if _, err := e.check("fail"); status.Code(err) != codes.Internal {
			t.Fatalf("failing call: %v", err)
		}
	}
	if _, err := e.check(""); status.Code(err) != codes.Unavailable || status.Convert(err).Message() != "switchyard: breaker_open" {
		t.Fatalf("open breaker: %v", err)
	}
}

func TestReadOnlyAndQueueWrites(t *testing.T) {
	e := setup(t)
	flip := func(name string, level wire.Level, st string) {
		e.put(t, wire.SwitchKey(ns, app, name), wire.Switch{App: app, Name: name, Level: level, State: st, Rollout: wire.Rollout{Percent: 100}, Version: 1})
		h := e.c.Switch(name)
		waitFor(t, name, func() bool { return h.On(context.Background()) == (st == wire.StateOn) })
	}
	flip("db-readonly", wire.L4, wire.StateOn)
	// Check is a read: served, with the level in its context.
	if _, err := e.check(""); err != nil {
		t.Fatalf("read under L4: %v", err)
	}
	if lv := <-e.seen; lv != wire.L4 {
		t.Errorf("read saw level %q", lv)
	}
	// CreateWatch is a write (by name): Unavailable read_only, handler not run.
	err := e.watch()
	if status.Code(err) != codes.Unavailable || status.Convert(err).Message() != "switchyard: read_only" {
		t.Fatalf("write under L4: %v", err)
	}
	flip("db-readonly", wire.L4, wire.StateOff)
	flip("orders-queue", wire.L5, wire.StateOn)
	if err := e.watch(); status.Code(err) != codes.Unavailable || status.Convert(err).Message() != "switchyard: queue_unavailable" {
		t.Fatalf("write under L5: %v", err)
	}
	if q, r := e.degraded(t, wire.L5, "queued"), e.degraded(t, wire.L5, "rejected"); q != 0 || r != 1 {
		t.Errorf("L5 write refused with Unavailable counted queued=%v rejected=%v, want 0 and 1", q, r)
	}
	flip("orders-queue", wire.L5, wire.StateOff)
	if err := e.watch(); err != nil {
		t.Fatalf("write after recovery: %v", err)
	}
	if lv := <-e.seen; lv != "" {
		t.Errorf("normal stream saw level %q", lv)
	}
	if len(e.seen) != 0 {
		t.Error("a rejected call reached its handler")
	}
}

func TestIsWriteMethod(t *testing.T) {
	for m, want := range map[string]bool{
		"/shop.v1.Orders/CreateOrder": true, "/shop.v1.Orders/DeleteOrder": true, "/shop.v1.Orders/GetOrder": false,
		"/shop.v1.Orders/ListOrders": false, "Update": true, "Get": false, "/test.Probe/Check": false,
		// Fail closed: verbs it does not know are writes, so L4 refuses them.
		"/shop.v1.Orders/SubmitOrder": true, "/shop.v1.Payments/Transfer": true, "/shop.v1.Orders/PlaceOrder": true,
		"/shop.v1.Mail/Send": true, "/shop.v1.Travel/Getaway": true, "/shop.v1.Users/Listen": true,
		"/grpc.health.v1.Health/Watch": false, "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo": false,
	} {
		if got := grpcx.IsWriteMethod(m); got != want {
			t.Errorf("IsWriteMethod(%s) = %v", m, got)
		}
	}
}
