package sdk

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/switchyard-io/switchyard/internal/etcdtest"
	"github.com/switchyard-io/switchyard/sdk/limit"
	"github.com/switchyard-io/switchyard/sdk/wire"
)

// rule returns an enforce/instance rule of the test app.
func rule(resource, kind string) wire.LimitRule {
	return wire.LimitRule{App: "checkout", Resource: resource, Kind: kind,
		Mode: wire.ModeEnforce, Scope: wire.ScopeInstance, Version: 1}
}

func putRule(t testing.TB, cli *clientv3.Client, ns string, r wire.LimitRule) {
	t.Helper()
	put(t, cli, wire.LimitKey(ns, r.App, r.Resource), mustJSON(t, r))
}

// waitRule waits until the limiter enforces version v of its rule.
func waitRule(t testing.TB, l *Limiter, v int64) {
	t.Helper()
	waitFor(t, 10*time.Second, fmt.Sprintf("%s rule v%d", l.Resource(), v), func() bool {
		r := l.Rule()
		return r != nil && r.Version == v
	})
}

// etcdClient starts embedded etcd and an SDK client on it.
func etcdClient(t *testing.T, cfg Config) (*Client, *clientv3.Client) {
	t.Helper()
	srv := etcdtest.Start(t)
	cfg.Endpoints = []string{srv.Endpoint}
	return newTestClient(t, cfg), srv.Client(t)
}

// series returns the value of the series of name whose labels include
// want, and whether it exists.
func series(t testing.TB, g prometheus.Gatherer, name string, want map[string]string) (float64, bool) {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue next
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue(), true
			case m.Gauge != nil:
				return m.Gauge.GetValue(), true
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount()), true
			}
			return 0, true
		}
	}
	return 0, false
}

func TestLimiterWithoutRuleAllows(t *testing.T) {
	c := newTestClient(t, Config{})
	l := c.Limiter("POST /orders")
	if c.Limiter("POST /orders") != l {
		t.Fatal("Limiter returns a new handle for the same resource")
	}
	ctx := context.Background()
	for range 100 {
		if d := l.Allow(ctx); !d.OK {
			t.Fatalf("no rule, rejected: %+v", d)
		}
	}
	p, err := l.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p.Release()
	if err := l.Do(ctx, func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if allocs := testing.AllocsPerRun(100, func() { l.Allow(ctx) }); allocs != 0 {
		t.Errorf("Allow without rule allocates %v", allocs)
	}
}

// TestLimiterLiveRuleChange: a rule published in etcd is enforced on the
// next call, a changed rule keeps the bucket's tokens, a new kind starts
// fresh, and a deleted rule allows everything again.
func TestLimiterLiveRuleChange(t *testing.T) {
	c, cli := etcdClient(t, Config{})
	ctx := context.Background()
	l := c.Limiter("POST /orders")
	r := rule("POST /orders", wire.KindTokenBucket)
	r.Rate, r.Burst = 0.01, 2
	putRule(t, cli, "test", r)
	waitRule(t, l, 1)
	for i := range 2 {
		if d := l.Allow(ctx); !d.OK {
			t.Fatalf("request %d rejected: %+v", i, d)
		}
	}
	d := l.Allow(ctx)
	if d.OK || d.Reason != limit.ReasonRate || d.RetryAfter < 90*time.Second {
		t.Fatalf("3rd request: %+v, want rate_limited with Retry-After ≈100s", d)
	}
	if allocs := testing.AllocsPerRun(100, func() { l.Allow(ctx) }); allocs != 0 {
		t.Errorf("Allow allocates %v", allocs)
	}
	// Same kind, larger burst: the empty bucket stays empty (state kept).
	r.Burst, r.Version = 50, 2
	putRule(t, cli, "test", r)
	waitRule(t, l, 2)
	if d := l.Allow(ctx); d.OK {
		t.Fatal("tokens not kept across an update of the same kind")
	}
	// A new kind starts fresh.
	r = rule("POST /orders", wire.KindSlidingWindow)
	r.Limit, r.Window, r.Version = 1, wire.Duration(time.Hour), 3
	putRule(t, cli, "test", r)
	waitRule(t, l, 3)
	if d := l.Allow(ctx); !d.OK {
		t.Fatalf("fresh sliding window rejected: %+v", d)
	}
	if d := l.Allow(ctx); d.OK {
		t.Fatal("sliding window limit 1 admitted twice")
	}
	del(t, cli, wire.LimitKey("test", "checkout", "POST /orders"))
	waitFor(t, 10*time.Second, "rule deleted", func() bool { return l.Rule() == nil })
	if d := l.Allow(ctx); !d.OK {
		t.Fatal("deleted rule still enforced")
	}
}

func TestLimiterShadowCountsWouldReject(t *testing.T) {
	reg := prometheus.NewRegistry()
	c, cli := etcdClient(t, Config{Registerer: reg})
	ctx := context.Background()
	l := c.Limiter("GET /search")
	r := rule("GET /search", wire.KindTokenBucket)
	r.Rate, r.Burst, r.Mode = 0.01, 1, wire.ModeShadow
	putRule(t, cli, "test", r)
	waitRule(t, l, 1)
	for i := range 5 {
		if d := l.Allow(ctx); !d.OK {
			t.Fatalf("shadow rule rejected request %d", i)
		}
	}
	labels := map[string]string{"resource": "GET /search", "reason": "rate_limited"}
	labels["decision"] = DecisionWouldReject
	if v, _ := series(t, reg, "switchyard_sdk_limit_decisions_total", labels); v != 4 {
		t.Errorf("would_reject = %v, want 4", v)
	}
	labels["decision"] = DecisionRejected
	if v, _ := series(t, reg, "switchyard_sdk_limit_decisions_total", labels); v != 0 {
		t.Errorf("rejected = %v, want 0", v)
	}
	if v, _ := series(t, reg, "switchyard_sdk_limit_decisions_total", map[string]string{"resource": "GET /search", "decision": DecisionAllowed}); v != 1 {
		t.Errorf("allowed = %v, want 1", v)
	}
}

// TestLimiterClusterScope simulates peers by writing instance keys: the
// per-instance share follows the live instance count.
func TestLimiterClusterScope(t *testing.T) {
	reg := prometheus.NewRegistry()
	c, cli := etcdClient(t, Config{InstanceID: "self", Registerer: reg})
	l := c.Limiter("POST /orders")
	r := rule("POST /orders", wire.KindTokenBucket)
	r.Scope, r.Rate, r.Burst = wire.ScopeCluster, 100, 40
	putRule(t, cli, "test", r)
	waitRule(t, l, 1)
	burst := func(want int) {
		t.Helper()
		waitFor(t, 10*time.Second, fmt.Sprintf("burst %d", want), func() bool { return l.Rule().Burst == want })
	}
	burst(40) // alone (self counts even before its registration is seen)
	peer := func(id string) string {
		k := wire.InstanceKey("test", "checkout", id)
		put(t, cli, k, mustJSON(t, wire.Instance{App: "checkout", InstanceID: id, SDKVersion: Version, StartedAt: time.Now()}))
		return k
	}
	p1 := peer("peer-1")
	burst(20)
	if got := l.Rule().Rate; got != 50 {
		t.Errorf("rate with 2 instances = %v, want 50", got)
	}
	peer("peer-2")
	p3 := peer("peer-3")
	burst(10)
	if v, _ := series(t, reg, "switchyard_sdk_cluster_instances", nil); v != 4 {
		t.Errorf("cluster_instances = %v, want 4", v)
	}
	del(t, cli, p1)
	del(t, cli, p3)
	burst(20)
	// Instance-scope rules of the same client are not divided.
	l2 := c.Limiter("GET /x")
	r2 := rule("GET /x", wire.KindConcurrency)
	r2.Max = 8
	putRule(t, cli, "test", r2)
	waitRule(t, l2, 1)
	if l2.Rule().Max != 8 {
		t.Errorf("instance rule divided: max %d", l2.Rule().Max)
	}
}

func TestClusterShareFloor(t *testing.T) {
	tb := rule("r", wire.KindTokenBucket)
	tb.Scope, tb.Rate, tb.Burst = wire.ScopeCluster, 10, 3
	for _, tc := range []struct {
		n     int
		rate  float64
		burst int
	}{{1, 10, 3}, {2, 5, 2}, {4, 2.5, 1}, {100, 1, 1}} {
		s := ClusterShare(&tb, tc.n)
		if s.Rate != tc.rate || s.Burst != tc.burst {
			t.Errorf("n=%d: rate %v burst %d, want %v %d", tc.n, s.Rate, s.Burst, tc.rate, tc.burst)
		}
	}
	small := tb
	small.Rate = 0.5
	if s := ClusterShare(&small, 10); s.Rate != 0.5 {
		t.Errorf("rate below 1/s shared to %v, want the whole 0.5 (floor)", s.Rate)
	}
	ad := rule("r", wire.KindAdaptive)
	ad.Scope, ad.Min, ad.Max = wire.ScopeCluster, 4, 20
	if s := ClusterShare(&ad, 8); s.Min != 1 || s.Max != 3 {
		t.Errorf("adaptive share = min %d max %d, want 1 3", s.Min, s.Max)
	}
	br := rule("r", wire.KindBreaker)
	br.Scope = wire.ScopeCluster
	if ClusterShare(&br, 8) != &br {
		t.Error("breaker rule divided")
	}
	inst := tb
	inst.Scope = wire.ScopeInstance
	if ClusterShare(&inst, 8) != &inst {
		t.Error("instance rule divided")
	}
}

func TestLimiterKeyByContext(t *testing.T) {
	c, cli := etcdClient(t, Config{})
	l := c.Limiter("GET /feed")
	r := rule("GET /feed", wire.KindTokenBucket)
	r.Rate, r.Burst = 0.01, 1
	r.KeyBy = wire.KeyBy{Source: "context", MaxKeys: 100}
	putRule(t, cli, "test", r)
	waitRule(t, l, 1)
	a := WithKey(context.Background(), "tenant-a")
	b := WithKey(context.Background(), "tenant-b")
	if !l.Allow(a).OK || l.Allow(a).OK {
		t.Error("tenant-a: want one admission")
	}
	if !l.Allow(b).OK {
		t.Error("tenant-b limited by tenant-a's use")
	}
	// Per-key state is capped.
	for i := range 1000 {
		l.Allow(WithKey(context.Background(), fmt.Sprint("k", i)))
	}
	if n := l.cur.Load().keyed.Len(); n > 100 {
		t.Errorf("keys kept = %d, cap 100", n)
	}
}

func TestLimiterConcurrencyAcquire(t *testing.T) {
	reg := prometheus.NewRegistry()
	c, cli := etcdClient(t, Config{Registerer: reg})
	l := c.Limiter("inference.generate")
	r := rule("inference.generate", wire.KindConcurrency)
	r.Max = 3
	putRule(t, cli, "test", r)
	waitRule(t, l, 1)
	ctx := context.Background()
	var inflight, peak atomic.Int64
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			err := l.Do(ctx, func(context.Context) error {
				n := inflight.Add(1)
				for {
					p := peak.Load()
					if n <= p || peak.CompareAndSwap(p, n) {
						break
					}
				}
				time.Sleep(time.Millisecond)
				inflight.Add(-1)
				return nil
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if peak.Load() > 3 || peak.Load() == 0 {
		t.Errorf("peak in flight %d, max 3", peak.Load())
	}
	// Non-blocking admission rejects above max and reports in flight.
	var ps []Permit
	for range 3 {
		p, d := l.Admit(ctx)
		if !d.OK {
			t.Fatal("slot refused below max")
		}
		ps = append(ps, p)
	}
	if _, d := l.Admit(ctx); d.OK || d.Reason != limit.ReasonConcurrency {
		t.Errorf("4th admission: %+v", d)
	}
	if d := l.Allow(ctx); d.OK {
		t.Error("Allow reports a free slot at max")
	}
	if v, _ := series(t, reg, "switchyard_sdk_limit_in_flight", map[string]string{"resource": "inference.generate"}); v != 3 {
		t.Errorf("in_flight = %v, want 3", v)
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := l.Acquire(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Acquire at max: %v, want deadline exceeded", err)
	}
	for _, p := range ps {
		p.Release()
	}
	if d := l.Allow(ctx); !d.OK {
		t.Error("Allow after release rejected")
	}
}

func TestLimiterBreaker(t *testing.T) {
	reg := prometheus.NewRegistry()
	c, cli := etcdClient(t, Config{Registerer: reg})
	errBusiness := errors.New("not found")
	l := c.Limiter("payments", IsFailure(func(err error) bool { return !errors.Is(err, errBusiness) }))
	r := rule("payments", wire.KindBreaker)
	r.ErrorRate, r.MinRequests, r.Window, r.OpenDuration, r.HalfOpenProbes = 0.5, 4, wire.Duration(time.Minute), wire.Duration(time.Minute), 1
	putRule(t, cli, "test", r)
	waitRule(t, l, 1)
	ctx := context.Background()
	boom := errors.New("boom")
	for range 10 {
		_ = l.Do(ctx, func(context.Context) error { return errBusiness })
	}
	if d := l.Allow(ctx); !d.OK {
		t.Fatal("business errors tripped the breaker")
	}
	open := 1 // the call below
	for range 20 {
		if errors.Is(l.Do(ctx, func(context.Context) error { return boom }), limit.ErrOpen) {
			open++
		}
	}
	err := l.Do(ctx, func(context.Context) error { t.Error("called through an open breaker"); return nil })
	var re *RejectError
	if !errors.Is(err, limit.ErrOpen) || !errors.As(err, &re) || re.Decision.RetryAfter <= 0 {
		t.Fatalf("Do on open breaker: %v", err)
	}
	if v, _ := series(t, reg, "switchyard_sdk_breaker_state", map[string]string{"resource": "payments", "state": "open"}); v != 1 {
		t.Errorf("breaker_state{state=open} = %v", v)
	}
	if v, _ := series(t, reg, "switchyard_sdk_breaker_transitions_total", map[string]string{"resource": "payments", "from": "closed", "to": "open"}); v != 1 {
		t.Errorf("transitions closed->open = %v", v)
	}
	labels := map[string]string{"resource": "payments", "decision": DecisionRejected, "reason": "breaker_open"}
	if v, _ := series(t, reg, "switchyard_sdk_limit_decisions_total", labels); v != float64(open) {
		t.Errorf("rejected breaker_open = %v, want %d", v, open)
	}
}

// TestLimiterFakeClock drives a GCRA rule with an injected clock: Acquire
// waits the pacing delay, Allow reports it.
func TestLimiterFakeClock(t *testing.T) {
	clock := limit.NewFakeClock()
	c, cli := etcdClient(t, Config{})
	l := c.Limiter("GET /slow", LimitClock(clock))
	r := rule("GET /slow", wire.KindGCRA)
	r.Rate, r.MaxWait = 100, wire.Duration(25*time.Millisecond)
	putRule(t, cli, "test", r)
	waitRule(t, l, 1)
	ctx := context.Background()
	var waits []time.Duration
	for range 5 {
		d := l.Allow(ctx)
		if !d.OK {
			break
		}
		waits = append(waits, d.Wait)
	}
	if len(waits) != 3 || waits[0] != 0 || waits[1] != 10*time.Millisecond || waits[2] != 20*time.Millisecond {
		t.Errorf("waits = %v, want [0 10ms 20ms] then rejection", waits)
	}
	clock.Advance(time.Second)
	if d := l.Allow(ctx); !d.OK || d.Wait != 0 {
		t.Errorf("after a second: %+v", d)
	}
}

// TestLimiterAllowBreakerAfterOpenPeriod: once the open period is over,
// Allow reports that a call would be admitted (as the half-open probe),
// rather than rejecting until some other caller moves the breaker on.
func TestLimiterAllowBreakerAfterOpenPeriod(t *testing.T) {
	clock := limit.NewFakeClock()
	c, cli := etcdClient(t, Config{})
	l := c.Limiter("payments", LimitClock(clock))
	r := rule("payments", wire.KindBreaker)
	r.ErrorRate, r.MinRequests, r.Window, r.OpenDuration, r.HalfOpenProbes = 0.5, 2, wire.Duration(time.Minute), wire.Duration(time.Second), 1
	putRule(t, cli, "test", r)
	waitRule(t, l, 1)
	ctx := context.Background()
	boom := errors.New("boom")
	for range 2 {
		_ = l.Do(ctx, func(context.Context) error { return boom })
	}
	if d := l.Allow(ctx); d.OK || d.Reason != limit.ReasonBreakerOpen || d.RetryAfter != time.Second {
		t.Fatalf("Allow on an open breaker = %+v", d)
	}
	clock.Advance(time.Second)
	if d := l.Allow(ctx); !d.OK {
		t.Fatalf("Allow after the open period = %+v, want OK (a probe would be admitted)", d)
	}
	if err := l.Do(ctx, func(context.Context) error { return nil }); err != nil {
		t.Fatalf("probe: %v", err)
	}
}

// TestLimiterShadowGCRADoesNotPace: a shadow GCRA rule must not make
// requests wait (the middleware would sleep, and answer 429 to a request
// whose context ended meanwhile); only the decision is recorded.
func TestLimiterShadowGCRADoesNotPace(t *testing.T) {
	clock := limit.NewFakeClock()
	c, cli := etcdClient(t, Config{})
	l := c.Limiter("GET /slow", LimitClock(clock))
	r := rule("GET /slow", wire.KindGCRA)
	r.Rate, r.MaxWait, r.Mode = 1, wire.Duration(5*time.Second), wire.ModeShadow
	putRule(t, cli, "test", r)
	waitRule(t, l, 1)
	ctx := context.Background()
	for i := range 10 {
		if d := l.Allow(ctx); !d.OK || d.Wait != 0 {
			t.Fatalf("shadow Allow %d = %+v, want OK without wait", i, d)
		}
		if _, d := l.Admit(ctx); !d.OK || d.Wait != 0 {
			t.Fatalf("shadow Admit %d = %+v, want OK without wait", i, d)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := l.Acquire(cctx); err != nil {
		t.Fatalf("shadow Acquire with an ended context: %v, want no wait and no error", err)
	}
}

// lingerWatcher wraps a Watcher: a watch on prefix keeps its channel open
// for linger after its context ends, as a watch torn down over a slow
// connection does.
type lingerWatcher struct {
	clientv3.Watcher
	prefix  string
	linger  time.Duration
	started chan struct{} // receives once per watch on prefix
}

func (w *lingerWatcher) Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan {
	in := w.Watcher.Watch(ctx, key, opts...)
	if key != w.prefix {
		return in
	}
	out := make(chan clientv3.WatchResponse)
	go func() {
		defer close(out)
		for {
			select {
			case wr, ok := <-in:
				if !ok {
					return
				}
				select {
				case out <- wr:
					continue
				case <-ctx.Done():
				}
			case <-ctx.Done():
			}
			<-time.After(w.linger)
			return
		}
	}()
	select {
	case w.started <- struct{}{}:
	default:
	}
	return out
}

// TestCloseStopsPeerWatch: the watch of the live instances behind a
// cluster-scope rule belongs to the client, and Close returns only after
// it has ended.
func TestCloseStopsPeerWatch(t *testing.T) {
	srv := etcdtest.Start(t)
	cli := srv.Client(t)
	w := &lingerWatcher{prefix: wire.AppPrefix("test", wire.KindInstances, "checkout"), linger: 2 * time.Second,
		started: make(chan struct{}, 1)}
	c := newWrappedTestClient(t, Config{Endpoints: []string{srv.Endpoint}, InstanceID: "self"},
		func(cli *clientv3.Client) { w.Watcher, cli.Watcher = cli.Watcher, w })
	l := c.Limiter("POST /orders")
	r := rule("POST /orders", wire.KindTokenBucket)
	r.Scope, r.Rate, r.Burst = wire.ScopeCluster, 100, 40
	putRule(t, cli, "test", r)
	waitRule(t, l, 1)
	select {
	case <-w.started:
	case <-time.After(10 * time.Second):
		t.Fatal("no watch of the instances within 10s of a cluster-scope rule")
	}
	c.Close()
	buf := make([]byte, 1<<20)
	if stacks := string(buf[:runtime.Stack(buf, true)]); strings.Contains(stacks, ".watchPeers(") {
		t.Fatal("Close returned while the peer watch still runs")
	}
}
