package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/sdk"
	"github.com/switchyard-io/switchyard/sdk/wire"
	"github.com/switchyard-io/switchyard/server/console"
	"github.com/switchyard-io/switchyard/server/rollout"
)

// testClock is a console clock the test moves: real time plus an offset,
// so holds pass when the test says, while etcd leases and SDK acks run on
// real time.
type testClock struct{ offset atomic.Int64 }

func (c *testClock) now() time.Time           { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *testClock) advance(d time.Duration)  { c.offset.Add(int64(d)) }
func (c *testClock) option() []console.Option { return []console.Option{console.WithClock(c.now)} }

// fleetClient is one SDK instance of a test fleet.
type fleetClient struct {
	id string
	c  *sdk.Client
	h  *sdk.Handle
}

// startClients runs one SDK client per id on the env's etcd, for app,
// each watching switch name, and waits until every one has live data.
func (e *env) startClients(app, name string, ids []string, labels map[string]string) []*fleetClient {
	e.t.Helper()
	out := make([]*fleetClient, 0, len(ids))
	for _, id := range ids {
		c, err := sdk.New(context.Background(), sdk.Config{Endpoints: []string{e.etcd.Endpoint}, App: app, InstanceID: id,
			Labels: labels, ReportInterval: time.Second, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			e.t.Fatal(err)
		}
		e.t.Cleanup(func() { c.Close() })
		out = append(out, &fleetClient{id: id, c: c, h: c.Switch(name)})
	}
	for _, fc := range out {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		err := fc.c.WaitReady(ctx)
		cancel()
		if err != nil {
			e.t.Fatalf("%s: %v", fc.id, err)
		}
	}
	return out
}

// answeringOn is the set of clients whose own code sees the switch on.
func answeringOn(clients []*fleetClient) []string {
	var on []string
	for _, fc := range clients {
		if fc.h.On(context.Background()) {
			on = append(on, fc.id)
		}
	}
	return on
}

// plan reads plan id of app through the API.
func plan(t testing.TB, c *console.Console, app string, id int64) rollout.View {
	t.Helper()
	r := mustStatus(t, call(t, c, "GET", fmt.Sprintf("/api/v1/apps/%s/rollouts/%d", app, id), adminToken, ""), 200)
	var body struct{ Rollout rollout.View }
	if err := json.Unmarshal([]byte(r.Raw), &body); err != nil {
		t.Fatal(err)
	}
	return body.Rollout
}

// waitPlan waits until cond holds for plan id and returns it.
func waitPlan(t testing.TB, c *console.Console, app string, id int64, within time.Duration, what string, cond func(v rollout.View) bool) rollout.View {
	t.Helper()
	var v rollout.View
	eventually(t, within, what, func() bool { v = plan(t, c, app, id); return cond(v) })
	return v
}

// startPlan posts a plan and returns its id.
func startPlan(t testing.TB, c *console.Console, app, body string) int64 {
	t.Helper()
	r := mustStatus(t, call(t, c, "POST", "/api/v1/apps/"+app+"/rollouts", adminToken, body), 201)
	return int64(r.num("rollout", "id"))
}

// step returns record i of the history, nil when the plan is not there.
func step(v rollout.View, i int) *rollout.StepView {
	if i < len(v.History) {
		return &v.History[i]
	}
	return nil
}

func converged(v rollout.View, i int) bool { s := step(v, i); return s != nil && s.ConvergedAt != nil }

// events lists the audit events of target, oldest first.
func events(t testing.TB, c *console.Console, target string) []audit.Event {
	t.Helper()
	evs, _, err := c.Service.ListAudit(context.Background(), audit.Filter{Target: target, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	slices.Reverse(evs)
	return evs
}

// planChanges are the switch changes made by plan cause: actions in order.
func planChanges(t testing.TB, c *console.Console, app, name, cause string) []audit.Event {
	t.Helper()
	var out []audit.Event
	for _, ev := range events(t, c, "switch/"+app+"/"+name) {
		if ev.ActorKind == audit.ActorRollout && ev.Cause == cause {
			out = append(out, ev)
		}
	}
	return out
}

// stuckInstance registers an instance that never acknowledges anything
// after its start, as a client whose watch is stuck looks to the console:
// its lease-bound key says it applied revision rev and stays so. Revoking
// the returned lease makes it leave the fleet.
func (e *env) stuckInstance(app, id string, rev int64) clientv3.LeaseID {
	e.t.Helper()
	ctx := context.Background()
	lease, err := e.cli.Grant(ctx, 5)
	if err != nil {
		e.t.Fatal(err)
	}
	kctx, cancel := context.WithCancel(ctx)
	e.t.Cleanup(cancel)
	ka, err := e.cli.KeepAlive(kctx, lease.ID)
	if err != nil {
		e.t.Fatal(err)
	}
	go func() {
		for range ka {
		}
	}()
	now := time.Now().UTC()
	v, _ := json.Marshal(wire.Instance{App: app, InstanceID: id, SDKVersion: "stuck", AppliedRevision: rev, AppliedAt: now, StartedAt: now})
	if _, err := e.cli.Put(ctx, wire.InstanceKey("default", app, id), string(v), clientv3.WithLease(lease.ID)); err != nil {
		e.t.Fatal(err)
	}
	return lease.ID
}

// TestRolloutFollowsTheFleet: 20 SDK clients; a plan 5 % → 50 % → 100 %
// advances only once each step is applied by its targets, and its hold
// counts from then. A 21st instance that never acknowledges (a client
// whose watch is stuck) is in the 50 % step: it blocks the step, however
// long past the hold, until it leaves the fleet. Every step only adds
// members, as the clients' own answers show.
func TestRolloutFollowsTheFleet(t *testing.T) {
	const app, name = "checkout", "reco"
	e := newEnv(t)
	clk := &testClock{}
	c := e.startWith(clk.option())
	waitLeader(t, c)
	mustStatus(t, call(t, c, "POST", "/api/v1/apps/"+app+"/switches", adminToken, `{"name":"reco","level":"L3","reason":"seed"}`), 201)

	ids := make([]string, 20)
	for i := range ids {
		ids[i] = fmt.Sprintf("inst-%02d", i)
	}
	clients := e.startClients(app, name, ids, nil)
	// The stuck instance is in the 50 % step but not in the 5 % one.
	stuck := ""
	for i := 0; stuck == ""; i++ {
		if b := wire.Bucket(app, name, fmt.Sprintf("stuck-%d", i)); b >= 500 && b < 5000 {
			stuck = fmt.Sprintf("stuck-%d", i)
		}
	}
	head, err := e.cli.Get(context.Background(), "x")
	if err != nil {
		t.Fatal(err)
	}
	lease := e.stuckInstance(app, stuck, head.Header.Revision)
	eventually(t, 10*time.Second, "the fleet model sees 21 instances", func() bool {
		_, total := c.Fleet.AppliedBy(app, 0, nil)
		return total == 21
	})
	targets := func(pct float64) []string {
		var in []string
		for _, id := range ids {
			if wire.Bucket(app, name, id) < int(pct*100) {
				in = append(in, id)
			}
		}
		return in
	}

	start := time.Now()
	id := startPlan(t, c, app, `{"switch":"reco","steps":[{"percent":5,"hold":"1m"},{"percent":50,"hold":"1m"},{"percent":100}],"reason":"INC-7 stage the fallback"}`)
	cause := rollout.Cause(app, name, id)

	// Step 1: 5 %, applied by its targets before its hold starts.
	v := waitPlan(t, c, app, id, 20*time.Second, "step 1 converges", func(v rollout.View) bool { return converged(v, 0) })
	s1 := step(v, 0)
	want1 := targets(s1.Rollout.Percent)
	t.Logf("step 1 (%s%s) converged %v after the start: applied %d/%d at revision %d",
		s1.Target, map[bool]string{true: ", " + s1.Raised, false: ""}[s1.Raised != ""], time.Since(start).Round(time.Millisecond), s1.Applied, s1.Targeted, s1.Revision)
	if s1.Applied != len(want1) || s1.Targeted != len(want1) || len(want1) == 0 {
		t.Fatalf("step 1: applied %d/%d, want every one of %v", s1.Applied, s1.Targeted, want1)
	}
	if !s1.ConvergedAt.After(s1.StartedAt) && !s1.ConvergedAt.Equal(s1.StartedAt) {
		t.Fatalf("converged %v before it started %v", s1.ConvergedAt, s1.StartedAt)
	}
	on1 := answeringOn(clients)
	if !slices.Equal(on1, want1) {
		t.Fatalf("clients answering on after step 1: %v, want %v", on1, want1)
	}
	if v.History[0].HoldEndsAt == nil || !v.History[0].HoldEndsAt.Equal(s1.ConvergedAt.Add(time.Minute)) {
		t.Fatalf("hold ends %v, want a minute after convergence %v", v.History[0].HoldEndsAt, s1.ConvergedAt)
	}

	// Step 2: 50 %, which holds the stuck instance.
	clk.advance(time.Minute)
	v = waitPlan(t, c, app, id, 20*time.Second, "step 2 has all its live SDK clients' acks", func(v rollout.View) bool {
		s := step(v, 1)
		return s != nil && s.Targeted > 0 && s.Applied == s.Targeted-1
	})
	s2 := step(v, 1)
	want2 := targets(50)
	if s2.ConvergedAt != nil || s2.Targeted != len(want2)+1 || s2.Rollout.Percent != 50 {
		t.Fatalf("step 2 converged without %s, or targets the wrong instances: %+v (want %d SDK clients + %s)", stuck, s2.StepRecord, len(want2), stuck)
	}
	t.Logf("step 2 (50 %%): %d/%d applied; %s never acknowledges: %q", s2.Applied, s2.Targeted, stuck, v.Note)
	// However long past its hold, the step waits for the stuck instance.
	clk.advance(time.Hour)
	blockedUntil := clk.now()
	v = waitPlan(t, c, app, id, 20*time.Second, "the live view names the stuck instance", func(v rollout.View) bool {
		return v.Live != nil && v.Live.Needed == v.Live.Targeted && v.Live.Applied == v.Live.Targeted-1
	})
	if len(v.History) != 2 || converged(v, 1) {
		t.Fatalf("the plan advanced past the stuck instance: %+v", v.History)
	}
	for _, in := range v.Live.Instances {
		if in.ID == stuck && in.Applied {
			t.Fatalf("the stuck instance shows as applied: %+v", v.Live.Instances)
		}
	}
	if _, err := e.cli.Revoke(context.Background(), lease); err != nil {
		t.Fatal(err)
	}
	left := time.Now()
	v = waitPlan(t, c, app, id, 20*time.Second, "step 2 converges once the stuck instance left", func(v rollout.View) bool { return converged(v, 1) })
	s2 = step(v, 1)
	t.Logf("step 2 converged %v after %s left the fleet: applied %d/%d", time.Since(left).Round(time.Millisecond), stuck, s2.Applied, s2.Targeted)
	if s2.ConvergedAt.Before(blockedUntil) || s2.Applied != len(want2) || s2.Targeted != len(want2) {
		t.Fatalf("step 2 converged at %v (the hold was long over at %v), applied %d/%d, want %d/%d", s2.ConvergedAt, blockedUntil, s2.Applied, s2.Targeted, len(want2), len(want2))
	}
	on2 := answeringOn(clients)
	if !slices.Equal(on2, want2) || !isSubset(on1, on2) {
		t.Fatalf("after step 2 on: %v, want %v (and a superset of %v)", on2, want2, on1)
	}

	// Step 3: 100 %, then done.
	clk.advance(time.Minute)
	v = waitPlan(t, c, app, id, 20*time.Second, "the plan is done", func(v rollout.View) bool { return v.State == rollout.Done })
	s3 := step(v, 2)
	on3 := answeringOn(clients)
	if s3.Applied != 20 || s3.Targeted != 20 || len(on3) != 20 || !isSubset(on2, on3) {
		t.Fatalf("step 3: applied %d/%d, on %v", s3.Applied, s3.Targeted, on3)
	}
	t.Logf("done; instances answering on per step: %d → %d → %d; each step only added members", len(on1), len(on2), len(on3))

	changes := planChanges(t, c, app, name, cause)
	if len(changes) != 3 {
		t.Fatalf("%d switch changes by the plan, want one per step: %+v", len(changes), changes)
	}
	for i, pct := range []string{"5 %", "50 %", "100 %"} {
		if changes[i].Action != audit.SwitchOn || !strings.Contains(changes[i].Reason, fmt.Sprintf("step %d of 3: %s", i+1, pct)) {
			t.Errorf("change %d: %s %q", i, changes[i].Action, changes[i].Reason)
		}
	}
	plans := events(t, c, cause)
	if len(plans) != 2 || plans[0].Action != audit.RolloutCreate || plans[1].Action != audit.RolloutDone || plans[1].ActorKind != audit.ActorRollout {
		t.Fatalf("plan events: %+v", plans)
	}
}

func isSubset(a, b []string) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}
