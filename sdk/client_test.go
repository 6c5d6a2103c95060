package sdk

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/switchyard-io/switchyard/internal/etcdtest"
	"github.com/switchyard-io/switchyard/sdk/wire"
)

// member reports whether instance id is in a percent rollout of app/name.
func member(app, name, id string, percent float64) bool {
	return Bucket(app, name, id) < wire.Rollout{Percent: percent}.Basis()
}

func TestFlipWidenOffDelete20Clients(t *testing.T) {
	srv := etcdtest.Start(t)
	cli := srv.Client(t)
	const ns, app, name = "test", "checkout", "recommend"
	type inst struct {
		c *Client
		h *Handle
	}
	var insts []inst
	for i := range 20 {
		c := newTestClient(t, Config{Endpoints: []string{srv.Endpoint}, Namespace: ns, App: app,
			InstanceID: fmt.Sprintf("inst-%02d", i)})
		insts = append(insts, inst{c, c.Switch(name, Default(true))})
	}
	for _, in := range insts {
		if err := in.c.WaitReady(ctxT(t, 10*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	converge := func(step string, want func(id string) bool, wantSource Source) {
		t.Helper()
		waitFor(t, 10*time.Second, step, func() bool {
			for _, in := range insts {
				if in.h.On(context.Background()) != want(in.c.InstanceID()) || in.h.Source() != wantSource {
					return false
				}
			}
			return true
		})
	}
	// Nothing published: the code default answers.
	converge("default", func(string) bool { return true }, SourceDefault)

	putSwitch(t, cli, ns, mkSwitch(app, name, wire.StateOn, 30))
	converge("on at 30%", func(id string) bool { return member(app, name, id, 30) }, SourceLive)
	members30 := 0
	for _, in := range insts {
		if in.h.On(context.Background()) {
			members30++
		}
	}

	rev := putSwitch(t, cli, ns, mkSwitch(app, name, wire.StateOn, 70))
	converge("widened to 70%", func(id string) bool { return member(app, name, id, 70) }, SourceLive)
	members70 := 0
	for _, in := range insts {
		if in.h.On(context.Background()) {
			members70++
		}
		if member(app, name, in.c.InstanceID(), 30) && !in.h.On(context.Background()) {
			t.Errorf("%s was a member at 30%% but not at 70%%", in.c.InstanceID())
		}
	}
	// The revision follows once every watch has confirmed it (see session).
	waitFor(t, 10*time.Second, "revision applied", func() bool {
		for _, in := range insts {
			if in.c.Revision() < rev {
				return false
			}
		}
		return true
	})
	if members30 == 0 || members70 <= members30 || members70 == 20 {
		t.Errorf("members: 30%%=%d 70%%=%d of 20; pick other ids", members30, members70)
	}

	putSwitch(t, cli, ns, mkSwitch(app, name, wire.StateOff, 70))
	converge("off", func(string) bool { return false }, SourceLive)

	del(t, cli, wire.SwitchKey(ns, app, name))
	converge("deleted, default again", func(string) bool { return true }, SourceDefault)
}

func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestDeleteAndBadValueTouchOnlyThatSwitch(t *testing.T) {
	srv := etcdtest.Start(t)
	cli := srv.Client(t)
	const ns, app = "test", "checkout"
	for _, n := range []string{"a", "b", "c"} {
		putSwitch(t, cli, ns, mkSwitch(app, n, wire.StateOn, 100))
	}
	reg := prometheus.NewRegistry()
	c := newTestClient(t, Config{Endpoints: []string{srv.Endpoint}, Namespace: ns, App: app, Registerer: reg})
	ctx := context.Background()
	waitFor(t, 10*time.Second, "initial list", func() bool {
		return c.On(ctx, "a") && c.On(ctx, "b") && c.On(ctx, "c")
	})
	var mu sync.Mutex
	var changes []Change
	c.OnChange(func(ch Change) { mu.Lock(); changes = append(changes, ch); mu.Unlock() })

	del(t, cli, wire.SwitchKey(ns, app, "a"))
	put(t, cli, wire.SwitchKey(ns, app, "b"), `{"app":"checkout","name":"b","level":"L9"`)
	put(t, cli, wire.SwitchKey(ns, app, "c"), `{"app":"checkout","name":"c","level":"L3","state":"maybe"}`)
	rev := putSwitch(t, cli, ns, mkSwitch(app, "d", wire.StateOn, 100))
	waitFor(t, 10*time.Second, "d applied", func() bool { return c.Revision() >= rev })
	if c.On(ctx, "a") {
		t.Error("a should be gone after its delete")
	}
	if !c.On(ctx, "b") || !c.On(ctx, "c") || !c.On(ctx, "d") {
		t.Error("b and c must keep their previous value after an unparsable update; d must be on")
	}
	if got := metricValue(t, reg, "switchyard_sdk_update_errors_total", "kind=decode"); got != 2 {
		t.Errorf("decode errors = %v, want 2", got)
	}
	if got := metricValue(t, reg, "switchyard_sdk_switch_on", "switch=d"); got != 1 {
		t.Errorf("switch_on{switch=d} = %v, want 1", got)
	}
	if got := metricValue(t, reg, "switchyard_sdk_applied_revision", ""); got < float64(rev) {
		t.Errorf("applied_revision = %v, want ≥ %d", got, rev)
	}
	waitFor(t, 10*time.Second, "watch_connected", func() bool {
		return metricValue(t, reg, "switchyard_sdk_watch_connected", "") == 1
	})
	if age := metricValue(t, reg, "switchyard_sdk_snapshot_age_seconds", ""); age < 0 || age > 60 {
		t.Errorf("snapshot age = %v", age)
	}
	mu.Lock()
	defer mu.Unlock()
	var names []string
	for _, ch := range changes {
		names = append(names, ch.Name)
		if ch.Kind != SwitchChanged {
			t.Errorf("unexpected change kind %v", ch.Kind)
		}
	}
	if fmt.Sprint(names) != "[a d]" {
		t.Errorf("changes = %v, want [a d]", names)
	}
}

func TestOverridesAndGlobalPrecedence(t *testing.T) {
	srv := etcdtest.Start(t)
	cli := srv.Client(t)
	const ns, app = "test", "checkout"
	c := newTestClient(t, Config{Endpoints: []string{srv.Endpoint}, Namespace: ns, App: app})
	h := c.Switch("search")
	ctx := context.Background()
	if err := c.WaitReady(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	// A _global switch is visible under its name.
	g := mkSwitch(wire.GlobalApp, "search", wire.StateOn, 100)
	g.Level = wire.L4
	putSwitch(t, cli, ns, g)
	waitFor(t, 10*time.Second, "global on", func() bool { return h.On(ctx) && h.Level() == wire.L4 })
	// The app's own switch of the same name wins.
	putSwitch(t, cli, ns, mkSwitch(app, "search", wire.StateOff, 100))
	waitFor(t, 10*time.Second, "app switch wins", func() bool { return !h.On(ctx) && h.Level() == wire.L3 })
	// A lease-bound override wins while it exists.
	lease, err := cli.Grant(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	o := mkSwitch(app, "search", wire.StateOn, 100)
	o.Level = wire.L1
	o.Fallback = json.RawMessage(`{"items":[]}`)
	put(t, cli, wire.OverrideKey(ns, app, "search"), mustJSON(t, o), clientv3.WithLease(lease.ID))
	waitFor(t, 10*time.Second, "override wins", func() bool { return h.On(ctx) && h.Level() == wire.L1 })
	var fb struct{ Items []string }
	if err := h.Fallback(&fb); err != nil || fb.Items == nil {
		t.Errorf("Fallback = %v, %+v", err, fb)
	}
	// The writer's lease ends: the published switch is back.
	if _, err := cli.Revoke(ctx, lease.ID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "override gone", func() bool { return !h.On(ctx) && h.Level() == wire.L3 })
	if err := h.Fallback(&fb); err != ErrNoFallback {
		t.Errorf("Fallback after override = %v, want ErrNoFallback", err)
	}
	// Deleting the app switch uncovers the global one again.
	del(t, cli, wire.SwitchKey(ns, app, "search"))
	waitFor(t, 10*time.Second, "global again", func() bool { return h.On(ctx) && h.Level() == wire.L4 })
}

func TestKeyStickinessAndSelector(t *testing.T) {
	srv := etcdtest.Start(t)
	cli := srv.Client(t)
	const ns, app = "test", "checkout"
	c := newTestClient(t, Config{Endpoints: []string{srv.Endpoint}, Namespace: ns, App: app,
		InstanceID: "inst-x", Labels: map[string]string{"zone": "a", "canary": "true"}})
	ctx := context.Background()
	keyed := mkSwitch(app, "keyed", wire.StateOn, 37.5)
	keyed.Rollout.Stickiness = wire.StickyKey
	putSwitch(t, cli, ns, keyed)
	sel := mkSwitch(app, "canary-only", wire.StateOn, 100)
	sel.Rollout.Selector = "zone=a,canary=true"
	putSwitch(t, cli, ns, sel)
	other := mkSwitch(app, "zone-b", wire.StateOn, 100)
	other.Rollout.Selector = "zone=b"
	rev := putSwitch(t, cli, ns, other)
	waitFor(t, 10*time.Second, "applied", func() bool { return c.Revision() >= rev })

	h := c.Switch("keyed")
	in := 0
	for i := range 1000 {
		key := fmt.Sprintf("tenant-%d", i)
		want := Bucket(app, "keyed", key) < 3750
		if got := h.On(WithKey(ctx, key)); got != want {
			t.Fatalf("key %s: On = %v, want %v", key, got, want)
		}
		if want {
			in++
		}
	}
	if in < 300 || in > 450 {
		t.Errorf("%d of 1000 keys in a 37.5%% rollout", in)
	}
	// Without a key the instance hash decides.
	if got, want := h.On(ctx), member(app, "keyed", "inst-x", 37.5); got != want {
		t.Errorf("keyless On = %v, want instance decision %v", got, want)
	}
	if !c.On(ctx, "canary-only") {
		t.Error("selector zone=a,canary=true should match")
	}
	if c.On(ctx, "zone-b") {
		t.Error("selector zone=b should not match")
	}
}

func TestLimitRules(t *testing.T) {
	srv := etcdtest.Start(t)
	cli := srv.Client(t)
	const ns, app = "test", "checkout"
	c := newTestClient(t, Config{Endpoints: []string{srv.Endpoint}, Namespace: ns, App: app})
	changed := make(chan Change, 10)
	c.OnChange(func(ch Change) {
		if ch.Kind == LimitChanged {
			changed <- ch
		}
	})
	rule := wire.LimitRule{App: app, Resource: "POST /orders", Kind: wire.KindTokenBucket,
		Mode: wire.ModeEnforce, Scope: wire.ScopeInstance, Rate: 100, Burst: 10, Version: 1}
	put(t, cli, wire.LimitKey(ns, app, rule.Resource), mustJSON(t, rule))
	global := rule
	global.App, global.Resource, global.Rate = wire.GlobalApp, "GET /health", 5
	put(t, cli, wire.LimitKey(ns, wire.GlobalApp, global.Resource), mustJSON(t, global))
	waitFor(t, 10*time.Second, "limits", func() bool {
		_, ok1 := c.LimitRule("POST /orders")
		_, ok2 := c.LimitRule("GET /health")
		return ok1 && ok2
	})
	if r, _ := c.LimitRule("POST /orders"); r.Rate != 100 || r.Burst != 10 {
		t.Errorf("rule = %+v", r)
	}
	// Invalid rule: previous one stays.
	put(t, cli, wire.LimitKey(ns, app, rule.Resource), `{"app":"checkout","resource":"POST /orders","kind":"token_bucket","mode":"enforce","scope":"instance","rate":-1}`)
	rev := del(t, cli, wire.LimitKey(ns, wire.GlobalApp, global.Resource))
	waitFor(t, 10*time.Second, "delete applied", func() bool { return c.Revision() >= rev })
	if r, ok := c.LimitRule("POST /orders"); !ok || r.Rate != 100 {
		t.Errorf("rule after invalid update = %+v, %v", r, ok)
	}
	if _, ok := c.LimitRule("GET /health"); ok {
		t.Error("deleted global rule still present")
	}
	got := map[string]bool{}
	for len(changed) > 0 {
		ch := <-changed
		got[ch.Name] = ch.Limit != nil
	}
	if !got["POST /orders"] || got["GET /health"] {
		t.Errorf("limit changes = %v", got)
	}
}

func TestCompactionRelists(t *testing.T) {
	srv := etcdtest.Start(t)
	cli := srv.Client(t)
	const ns, app = "test", "checkout"
	br := newBridge(t, endpoint(srv))
	putSwitch(t, cli, ns, mkSwitch(app, "keep", wire.StateOn, 100))
	putSwitch(t, cli, ns, mkSwitch(app, "gone", wire.StateOn, 100))
	c := newTestClient(t, Config{Endpoints: []string{br.addr()}, Namespace: ns, App: app})
	ctx := context.Background()
	waitFor(t, 10*time.Second, "initial", func() bool { return c.On(ctx, "keep") && c.On(ctx, "gone") })

	br.pause()
	waitFor(t, 15*time.Second, "stale while cut off", c.Stale)
	del(t, cli, wire.SwitchKey(ns, app, "gone"))
	putSwitch(t, cli, ns, mkSwitch(app, "keep", wire.StateOff, 100))
	rev := putSwitch(t, cli, ns, mkSwitch(app, "new", wire.StateOn, 100))
	for i := range 5 {
		put(t, cli, "/unrelated/"+fmt.Sprint(i), "x")
	}
	if _, err := cli.Compact(ctx, rev+5, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	// Still the old state while cut off.
	if !c.On(ctx, "keep") || !c.On(ctx, "gone") || c.On(ctx, "new") {
		t.Error("state changed while disconnected")
	}
	br.resume()
	waitFor(t, 20*time.Second, "converged after compaction", func() bool {
		return !c.On(ctx, "keep") && !c.On(ctx, "gone") && c.On(ctx, "new") && !c.Stale()
	})
	if c.relists.Load() == 0 {
		t.Error("client converged without a compaction re-list")
	}
}

func TestOutageKeepsStateAndRecovers(t *testing.T) {
	srv := etcdtest.Start(t)
	cli := srv.Client(t)
	const ns, app = "test", "checkout"
	putSwitch(t, cli, ns, mkSwitch(app, "x", wire.StateOn, 100))
	var cs []*Client
	for i := range 3 {
		cs = append(cs, newTestClient(t, Config{Endpoints: []string{srv.Endpoint}, Namespace: ns, App: app,
			InstanceID: fmt.Sprintf("i%d", i)}))
	}
	ctx := context.Background()
	waitFor(t, 10*time.Second, "ready", func() bool {
		for _, c := range cs {
			if c.Stale() || !c.On(ctx, "x") {
				return false
			}
		}
		return true
	})
	srv.Stop()
	stopped := time.Now()
	waitFor(t, 15*time.Second, "stale", func() bool {
		for _, c := range cs {
			if !c.Stale() {
				return false
			}
		}
		return true
	})
	for _, c := range cs {
		if !c.On(ctx, "x") {
			t.Error("lost last known state during outage")
		}
		if src := c.Switch("x").Source(); src != SourceStale {
			t.Errorf("source during outage = %v, want stale", src)
		}
	}
	t.Logf("stale %v after etcd stopped", time.Since(stopped))
	srv.Restart()
	restarted := time.Now()
	putSwitch(t, srv.Client(t), ns, mkSwitch(app, "x", wire.StateOff, 100)) // a fresh connection: cli may be in gRPC backoff
	t.Logf("put accepted %v after restart", time.Since(restarted))
	defer func() { t.Logf("converged %v after restart", time.Since(restarted)) }()
	waitFor(t, 20*time.Second, "converged after restart", func() bool {
		for _, c := range cs {
			if c.Stale() || c.On(ctx, "x") {
				return false
			}
		}
		return true
	})
	for _, c := range cs {
		if src := c.Switch("x").Source(); src != SourceLive {
			t.Errorf("source after recovery = %v, want live", src)
		}
	}
}

func TestInstanceRegistry(t *testing.T) {
	srv := etcdtest.Start(t)
	cli := srv.Client(t)
	const ns, app = "test", "checkout"
	c := newTestClient(t, Config{Endpoints: []string{srv.Endpoint}, Namespace: ns, App: app,
		InstanceID: "pod/1", Labels: map[string]string{"zone": "a"}})
	rev := putSwitch(t, cli, ns, mkSwitch(app, "x", wire.StateOn, 100))
	key := wire.InstanceKey(ns, app, "pod/1")
	var inst wire.Instance
	waitFor(t, 10*time.Second, "registered with applied revision", func() bool {
		v, ok := srv.Get(t, cli, key)
		if !ok || json.Unmarshal([]byte(v), &inst) != nil {
			return false
		}
		return inst.AppliedRevision >= rev
	})
	if inst.InstanceID != "pod/1" || inst.Labels["zone"] != "a" || inst.SDKVersion != Version ||
		inst.StartedAt.IsZero() || inst.AppliedAt.IsZero() {
		t.Errorf("instance = %+v", inst)
	}
	// A lost lease (the key vanishes) is re-registered.
	resp, err := cli.Get(context.Background(), key)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatal(err)
	}
	if _, err := cli.Revoke(context.Background(), clientv3.LeaseID(resp.Kvs[0].Lease)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "re-registered", func() bool { _, ok := srv.Get(t, cli, key); return ok })
	c.Close()
	waitFor(t, 10*time.Second, "deregistered on Close", func() bool { _, ok := srv.Get(t, cli, key); return !ok })
}

// TestStaleAtOnceWhenEtcdStops checks that Stale follows the connection,
// not only the lease keepalive: with a 60 s lease the keepalive alone
// would take over 30 s to notice, far past the deadline here.
func TestStaleAtOnceWhenEtcdStops(t *testing.T) {
	srv := etcdtest.Start(t)
	const ns, app = "test", "checkout"
	putSwitch(t, srv.Client(t), ns, mkSwitch(app, "x", wire.StateOn, 100))
	reg := prometheus.NewRegistry()
	c := newTestClient(t, Config{Endpoints: []string{srv.Endpoint}, Namespace: ns, App: app,
		LeaseTTL: time.Minute, Registerer: reg})
	ctx := context.Background()
	waitFor(t, 10*time.Second, "live", func() bool { return !c.Stale() && c.On(ctx, "x") })

	srv.Stop()
	waitFor(t, 15*time.Second, "stale after etcd stopped", c.Stale)
	if !c.On(ctx, "x") {
		t.Error("lost the last known state")
	}
	if got := metricValue(t, reg, "switchyard_sdk_watch_connected", ""); got != 0 {
		t.Errorf("watch_connected = %v while etcd is down", got)
	}

	srv.Restart()
	putSwitch(t, srv.Client(t), ns, mkSwitch(app, "x", wire.StateOff, 100))
	waitFor(t, 20*time.Second, "fresh again and converged", func() bool { return !c.Stale() && !c.On(ctx, "x") })
}
