package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/internal/promtest"
	"github.com/switchyard-io/switchyard/internal/servertest"
	"github.com/switchyard-io/switchyard/sdk"
	"github.com/switchyard-io/switchyard/sdk/wire"
	"github.com/switchyard-io/switchyard/server"
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

// waitFleet waits until c's fleet model sees n live instances of app.
func waitFleet(t testing.TB, c *console.Console, app string, n int) {
	t.Helper()
	servertest.Eventually(t, 15*time.Second, fmt.Sprintf("the fleet model sees %d instances of %s", n, app), func() bool {
		_, total := c.Fleet.AppliedBy(app, 0, nil)
		return total == n
	})
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
	servertest.Eventually(t, within, what, func() bool { v = plan(t, c, app, id); return cond(v) })
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
	waitFleet(t, c, app, len(ids))
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
	servertest.Eventually(t, 10*time.Second, "the fleet model sees 21 instances", func() bool {
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

// keysOn is the set of request keys (of 2,000) for which the client sees
// the switch on: with key stickiness, "the same keys" is this set.
func keysOn(fc *fleetClient) []string {
	var on []string
	for i := 0; i < 2000; i++ {
		k := fmt.Sprintf("tenant-%d", i)
		if fc.h.On(sdk.WithKey(context.Background(), k)) {
			on = append(on, k)
		}
	}
	return on
}

// switchState reads what a revert must put back exactly.
func switchState(t testing.TB, c *console.Console, app, name string) (server.SwitchState, int64) {
	t.Helper()
	sw, err := c.Service.GetSwitch(context.Background(), app, name)
	if err != nil {
		t.Fatal(err)
	}
	return sw.Saved(), sw.Version
}

func count(t testing.TB, c *console.Console, table, where string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := c.DB.Table(table).Where(where, args...).Count(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRolloutGates: a health condition on a real Prometheus series the
// test controls, and one on the fleet's own signals, each fail during a
// hold and revert the switch exactly as it was before the plan — state,
// rollout, on-since, expiry, and with key stickiness the same keys. A
// condition with no data pauses the plan: no data is not health. So do
// three measurements in a row that cannot reach Prometheus: an error is
// neither health nor a failure.
func TestRolloutGates(t *testing.T) {
	const app = "checkout"
	prom := promtest.Start(t)
	e := newEnv(t)
	c := e.start(func(c *console.Config) { c.PrometheusURL = prom.URL })
	waitLeader(t, c)
	for _, name := range []string{"pay", "cart", "slow"} {
		mustStatus(t, call(t, c, "POST", "/api/v1/apps/"+app+"/switches", adminToken, `{"name":"`+name+`","level":"L3","reason":"seed"}`), 201)
	}
	fc := e.startClients(app, "pay", []string{"gate-1"}, map[string]string{"zone": "a"})[0]
	waitFleet(t, c, app, 1)

	t.Run("a failing Prometheus series reverts exactly", func(t *testing.T) {
		mustStatus(t, call(t, c, "POST", "/api/v1/apps/checkout/switches/pay/on", adminToken,
			`{"reason":"half a percent of tenants","rollout":{"percent":0.5,"stickiness":"key","selector":"zone=a"}}`), 200)
		before, version := switchState(t, c, app, "pay")
		servertest.Eventually(t, 10*time.Second, "the client applied the manual change", func() bool { return fc.c.Switches()["pay"].Version == version })
		keysBefore := keysOn(fc)
		prom.Exporter.Set("checkout_error_ratio", 0.01)
		prom.Sync(t)

		id := startPlan(t, c, app, `{"switch":"pay","steps":[{"percent":10,"hold":"10m"},{"percent":100}],`+
			`"gate":{"interval":"1s","conditions":[{"source":"prometheus","query":"max(checkout_error_ratio)","op":"<","threshold":0.05}]},"reason":"widen"}`)
		v := waitPlan(t, c, app, id, 20*time.Second, "a passing measurement in step 1's hold", func(v rollout.View) bool {
			s := step(v, 0)
			return s != nil && s.Measurements > 0 && s.Passed
		})
		if got := *v.History[0].Verdicts[0].Value; got != 0.01 {
			t.Fatalf("verdict value %v", got)
		}
		servertest.Eventually(t, 10*time.Second, "the client applied 10 %", func() bool { return len(keysOn(fc)) > len(keysBefore) })
		t.Logf("step 1 holds at %s: %d of 2000 keys on (%d before); error ratio 0.01 passes", v.History[0].Target, len(keysOn(fc)), len(keysBefore))

		prom.Exporter.Set("checkout_error_ratio", 0.5)
		failed := time.Now()
		prom.Sync(t)
		v = waitPlan(t, c, app, id, 20*time.Second, "the plan reverts", func(v rollout.View) bool { return v.State == rollout.Reverted })
		t.Logf("reverted %v after the series turned bad: %s", time.Since(failed).Round(time.Millisecond), v.Note)
		if !strings.Contains(v.Note, "condition 1 (prometheus max(checkout_error_ratio) < 0.05) was 0.5") {
			t.Errorf("note %q", v.Note)
		}
		after, _ := switchState(t, c, app, "pay")
		if !reflect.DeepEqual(after, before) {
			t.Fatalf("after the revert:\n %+v\nbefore the plan:\n %+v", after, before)
		}
		servertest.Eventually(t, 10*time.Second, "the client serves the same keys as before", func() bool { return slices.Equal(keysOn(fc), keysBefore) })
		cause := rollout.Cause(app, "pay", id)
		changes := planChanges(t, c, app, "pay", cause)
		if len(changes) != 2 || changes[0].Action != audit.SwitchOn || changes[1].Action != audit.SwitchRestore {
			t.Fatalf("switch changes by the plan: %+v", changes)
		}
		plans := events(t, c, cause)
		if last := plans[len(plans)-1]; last.Action != audit.RolloutRevert || last.ActorKind != audit.ActorRollout {
			t.Fatalf("last plan event %+v", last)
		}
		if n := count(t, c, "notifications", "kind = ? AND target = ?", "rollout.reverted", cause); n != 1 {
			t.Fatalf("%d rollout.reverted notifications", n)
		}
	})

	t.Run("a failing fleet condition reverts exactly", func(t *testing.T) {
		cart := fc.c.Switch("cart")
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() { // the service's traffic: it asks the switch all the time
			defer close(done)
			tick := time.NewTicker(5 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
					cart.On(context.Background())
				}
			}
		}()
		defer func() { close(stop); <-done }()
		servertest.Eventually(t, 10*time.Second, "the fleet reports reads of cart", func() bool { return c.Fleet.Switch(app, "cart").Signals == 1 })
		before, _ := switchState(t, c, app, "cart")

		id := startPlan(t, c, app, `{"switch":"cart","template":"default",`+
			`"gate":{"interval":"1s","conditions":[{"source":"fleet","query":"degraded_share{switch=\"cart\"}","op":"<","threshold":0.5}]},"reason":"stage it"}`)
		v := waitPlan(t, c, app, id, 30*time.Second, "the plan reverts", func(v rollout.View) bool { return v.State == rollout.Reverted })
		s := step(v, 0)
		t.Logf("step 1 (%s; %s) reverted after %d measurement(s): %s", s.Target, s.Raised, s.Measurements, v.Note)
		if s.Raised == "" || !strings.Contains(s.Raised, "gate-1 is in") {
			t.Errorf("the first step did not say which instance it reaches: %q", s.Raised)
		}
		if !strings.Contains(v.Note, `degraded_share{switch="cart"} < 0.5) was 1`) {
			t.Errorf("note %q", v.Note)
		}
		after, _ := switchState(t, c, app, "cart")
		if !reflect.DeepEqual(after, before) {
			t.Fatalf("after the revert %+v, before the plan %+v", after, before)
		}
		servertest.Eventually(t, 10*time.Second, "the client sees cart off again", func() bool { return !cart.On(context.Background()) })
	})

	t.Run("a condition without data pauses", func(t *testing.T) {
		id := startPlan(t, c, app, `{"switch":"slow","steps":[{"percent":100,"hold":"1m"}],`+
			`"gate":{"interval":"1s","conditions":[{"source":"prometheus","query":"max(no_such_series)","op":"<","threshold":1}]},"reason":"stage it"}`)
		v := waitPlan(t, c, app, id, 20*time.Second, "the plan pauses", func(v rollout.View) bool { return v.State == rollout.Paused })
		t.Logf("paused: %s", v.Note)
		if !strings.Contains(v.Note, "had no data, and no data is not health") || v.History[0].Verdicts[0].Outcome != rollout.VerdictNoData {
			t.Fatalf("note %q, verdicts %+v", v.Note, v.History[0].Verdicts)
		}
		if st, _ := switchState(t, c, app, "slow"); st.State != wire.StateOn || st.Rollout.Percent != 100 {
			t.Fatalf("a pause moved the switch: %+v", st)
		}
		cause := rollout.Cause(app, "slow", id)
		plans := events(t, c, cause)
		if last := plans[len(plans)-1]; last.Action != audit.RolloutPause || last.ActorKind != audit.ActorRollout {
			t.Fatalf("last plan event %+v", last)
		}
		if n := count(t, c, "findings", "kind = ? AND target = ? AND resolved_at IS NULL", "rollout_paused", cause); n != 1 {
			t.Fatalf("%d open rollout_paused findings", n)
		}
		if n := count(t, c, "notifications", "kind = ? AND target = ?", "rollout.paused", cause); n != 1 {
			t.Fatalf("%d rollout.paused notifications", n)
		}
	})

	t.Run("Prometheus down pauses, never reverts", func(t *testing.T) {
		mustStatus(t, call(t, c, "POST", "/api/v1/apps/"+app+"/switches", adminToken, `{"name":"away","level":"L3","reason":"seed"}`), 201)
		prom.Exporter.Set("checkout_error_ratio", 0.01)
		prom.Sync(t)
		id := startPlan(t, c, app, `{"switch":"away","steps":[{"percent":100,"hold":"1h"}],`+
			`"gate":{"interval":"1s","conditions":[{"source":"prometheus","query":"max(checkout_error_ratio)","op":"<","threshold":0.05}]},"reason":"stage it"}`)
		waitPlan(t, c, app, id, 20*time.Second, "a passing measurement", func(v rollout.View) bool { s := step(v, 0); return s != nil && s.Passed })
		prom.Stop()
		down := time.Now()
		v := waitPlan(t, c, app, id, 30*time.Second, "the plan pauses", func(v rollout.View) bool { return v.State == rollout.Paused })
		t.Logf("paused %v after Prometheus went away: %s", time.Since(down).Round(time.Millisecond), v.Note)
		s := step(v, 0)
		if !strings.Contains(v.Note, "3 measurements in a row could not ask the source") || s.Failures != 0 || s.Verdicts[0].Outcome != rollout.VerdictError {
			t.Fatalf("note %q, record %+v", v.Note, s.StepRecord)
		}
		if st, _ := switchState(t, c, app, "away"); st.State != wire.StateOn {
			t.Fatalf("an unreachable source moved the switch: %+v", st)
		}
	})
}

// TestRolloutLeaderKilledDuringHold: the leader (a child process) is
// SIGKILLed three seconds into a ten-second hold; the other console takes
// over and resumes the same hold — it ends ten seconds after the
// convergence the dead leader recorded, not ten seconds after the
// takeover — and no step is applied twice: the audit log has one change
// per step.
func TestRolloutLeaderKilledDuringHold(t *testing.T) {
	const app, name, hold = "checkout", "reco", 10 * time.Second
	e := newEnv(t)
	boot := e.start(func(c *console.Config) { c.ConsoleID = "boot" })
	mustStatus(t, call(t, boot, "POST", "/api/v1/apps/checkout/switches", adminToken, `{"name":"reco","level":"L3","reason":"seed"}`), 201)
	e.startClients(app, name, []string{"k-1", "k-2"}, nil)
	waitFleet(t, boot, app, 2) // registered before the consoles below list the fleet
	stop(boot)

	dying := e.startProcess("dying")
	servertest.Eventually(t, 15*time.Second, "the process leads", func() bool { return electionLeader(e) == "dying" })
	survivor := e.start(func(c *console.Config) { c.ConsoleID = "survivor" })
	waitFleet(t, survivor, app, 2)

	id := startPlan(t, survivor, app, `{"switch":"reco","steps":[{"percent":10,"hold":"10s"},{"percent":100}],"reason":"stage"}`)
	v := waitPlan(t, survivor, app, id, 20*time.Second, "step 1 converges under the first leader", func(v rollout.View) bool { return converged(v, 0) })
	convergedAt := *v.History[0].ConvergedAt
	if electionLeader(e) != "dying" {
		t.Fatal("the first leader is gone before the hold")
	}
	<-time.After(time.Until(convergedAt.Add(3 * time.Second))) // the child runs on real time: kill it inside its hold
	killed := dying.kill(t)
	servertest.Eventually(t, 15*time.Second, "the survivor leads", survivor.Scheduler.Leading)
	leading := time.Now()

	v = waitPlan(t, survivor, app, id, 30*time.Second, "the survivor finishes the plan", func(v rollout.View) bool { return v.State == rollout.Done })
	step2 := v.History[1].StartedAt
	t.Logf("killed %v into the hold; the survivor led %v later; step 2 applied %v after step 1 converged (hold %v)",
		killed.Sub(convergedAt).Round(time.Millisecond), leading.Sub(killed).Round(time.Millisecond), step2.Sub(convergedAt).Round(time.Millisecond), hold)
	if got := *v.History[0].ConvergedAt; !got.Equal(convergedAt) {
		t.Fatalf("the hold was restarted: converged at %v, the first leader recorded %v", got, convergedAt)
	}
	if step2.Before(convergedAt.Add(hold)) {
		t.Fatalf("step 2 at %v, before the hold's end %v", step2, convergedAt.Add(hold))
	}
	if !step2.Before(leading.Add(hold)) {
		t.Fatalf("step 2 at %v: the survivor held again from its takeover (%v)", step2, leading)
	}
	if len(v.History) != 2 {
		t.Fatalf("history %+v", v.History)
	}
	cause := rollout.Cause(app, name, id)
	changes := planChanges(t, survivor, app, name, cause)
	if len(changes) != 2 || !strings.Contains(changes[0].Reason, "step 1 of 2") || !strings.Contains(changes[1].Reason, "step 2 of 2: 100 %") {
		t.Fatalf("switch changes by the plan (want one per step): %+v", changes)
	}
	for _, ev := range events(t, survivor, cause) {
		t.Logf("plan event #%d %s by %s (%s)", ev.ID, ev.Action, ev.Actor, ev.ActorKind)
	}
	if res, err := survivor.Service.VerifyAudit(context.Background()); err != nil || !res.OK() {
		t.Fatalf("audit chain: %+v %v", res, err)
	}
}

// act posts a pause, resume, abort or advance and returns the answer.
func act(t testing.TB, c *console.Console, app string, id int64, action, body string) response {
	t.Helper()
	return call(t, c, "POST", fmt.Sprintf("/api/v1/apps/%s/rollouts/%d/%s", app, id, action), adminToken, body)
}

// TestRolloutPeopleWin: a person turns the switch off during a plan; the
// plan pauses in the same transaction and says so, and the audit log has
// both. It stays paused however much time passes, a second plan for the
// switch is refused, and a person's resume, advance and abort (with
// revert) each do what they say, audited with their reasons.
func TestRolloutPeopleWin(t *testing.T) {
	const app = "checkout"
	e := newEnv(t)
	clk := &testClock{}
	c := e.startWith(clk.option())
	waitLeader(t, c)
	for _, name := range []string{"reco", "other"} {
		mustStatus(t, call(t, c, "POST", "/api/v1/apps/"+app+"/switches", adminToken, `{"name":"`+name+`","level":"L3","reason":"seed"}`), 201)
	}
	fc := e.startClients(app, "reco", []string{"p-1", "p-2", "p-3"}, nil)
	waitFleet(t, c, app, 3)
	id := startPlan(t, c, app, `{"switch":"reco","template":"default","reason":"stage the fallback"}`)
	cause := rollout.Cause(app, "reco", id)
	waitPlan(t, c, app, id, 20*time.Second, "step 1 converges", func(v rollout.View) bool { return converged(v, 0) })

	off := mustStatus(t, call(t, c, "POST", "/api/v1/apps/checkout/switches/reco/off", adminToken, `{"reason":"INC-9 the fallback is wrong"}`), 200)
	v := plan(t, c, app, id)
	if v.State != rollout.Paused || !strings.Contains(v.Note, "token:bootstrap#1 (token) made switch.off on the switch during the plan: paused, people win") {
		t.Fatalf("after the person's change: %s %q", v.State, v.Note)
	}
	t.Logf("paused in the person's transaction: %q", v.Note)
	sw := events(t, c, "switch/checkout/reco")
	pl := events(t, c, cause)
	personOff, pause := sw[len(sw)-1], pl[len(pl)-1]
	if personOff.Action != audit.SwitchOff || personOff.ActorKind != audit.ActorToken || pause.Action != audit.RolloutPause ||
		pause.ActorKind != audit.ActorRollout || pause.Cause != cause || pause.ID != personOff.ID+1 {
		t.Fatalf("audit: person %+v, plan %+v", personOff, pause)
	}
	if n := count(t, c, "findings", "kind = ? AND target = ? AND resolved_at IS NULL", "rollout_paused", cause); n != 1 {
		t.Fatalf("%d open rollout_paused findings", n)
	}
	if n := count(t, c, "notifications", "kind = ? AND target = ?", "rollout.paused", cause); n != 1 {
		t.Fatalf("%d rollout.paused notifications", n)
	}
	if off.num("switch", "version") == 0 {
		t.Fatal("no switch in the answer")
	}

	// An hour later — the job ran meanwhile, as a plan on another switch
	// shows — the paused plan has not touched the switch.
	other := startPlan(t, c, app, `{"switch":"other","steps":[{"percent":100,"hold":"1m"}],"reason":"sentinel"}`)
	waitPlan(t, c, app, other, 20*time.Second, "the sentinel converges", func(v rollout.View) bool { return converged(v, 0) })
	clk.advance(time.Hour)
	waitPlan(t, c, app, other, 20*time.Second, "the job steps after the hour", func(v rollout.View) bool { return v.State == rollout.Done })
	if v := plan(t, c, app, id); v.State != rollout.Paused || len(v.History) != 1 {
		t.Fatalf("the paused plan moved: %s %+v", v.State, v.History)
	}
	if st, _ := switchState(t, c, app, "reco"); st.State != wire.StateOff {
		t.Fatalf("the paused plan touched the switch: %+v", st)
	}

	// One active plan per switch.
	r := call(t, c, "POST", "/api/v1/apps/checkout/rollouts", adminToken, `{"switch":"reco","template":"default","reason":"again"}`)
	if r.Status != 409 || r.str("field") != "switch" {
		t.Fatalf("a second plan: %d %s", r.Status, r.Raw)
	}

	// Resume applies step 1 again and restarts its gate.
	mustStatus(t, act(t, c, app, id, "resume", `{"reason":"fallback fixed"}`), 200)
	v = waitPlan(t, c, app, id, 20*time.Second, "step 1 applied again and converged", func(v rollout.View) bool {
		return len(v.History) == 2 && converged(v, 1)
	})
	if v.History[0].Outcome != rollout.OutcomeStopped || v.History[1].Index != 0 || v.State != rollout.Running {
		t.Fatalf("after resume: %s %+v", v.State, v.History)
	}
	if n := count(t, c, "findings", "kind = ? AND target = ? AND resolved_at IS NULL", "rollout_paused", cause); n != 0 {
		t.Fatal("the finding is still open after resume")
	}
	// Advance skips the rest of the hold.
	mustStatus(t, act(t, c, app, id, "advance", `{"reason":"canary looks good"}`), 200)
	v = waitPlan(t, c, app, id, 20*time.Second, "step 2 applied", func(v rollout.View) bool { return len(v.History) == 3 })
	if v.History[1].Outcome != rollout.OutcomeAdvanced || v.History[2].Rollout.Percent != 50 {
		t.Fatalf("after advance: %+v", v.History)
	}
	// Pause, then abort with revert: the switch goes back to off, as it
	// was before the plan.
	mustStatus(t, act(t, c, app, id, "pause", `{"reason":"lunch"}`), 200)
	if r := act(t, c, app, id, "pause", `{"reason":"again"}`); r.Status != 409 {
		t.Fatalf("pausing a paused plan: %d %s", r.Status, r.Raw)
	}
	mustStatus(t, act(t, c, app, id, "abort", `{"reason":"not today","revert":true}`), 200)
	v = waitPlan(t, c, app, id, 20*time.Second, "reverted", func(v rollout.View) bool { return v.State == rollout.Reverted })
	if st, _ := switchState(t, c, app, "reco"); st.State != wire.StateOff || !reflect.DeepEqual(st, v.Before) {
		t.Fatalf("after abort with revert: %+v, before the plan %+v", st, v.Before)
	}
	servertest.Eventually(t, 10*time.Second, "every client sees it off", func() bool { return len(answeringOn(fc)) == 0 })

	var trail []string
	for _, ev := range events(t, c, cause) {
		trail = append(trail, fmt.Sprintf("%s/%s", ev.Action, ev.ActorKind))
	}
	for _, ev := range planChanges(t, c, app, "reco", cause) {
		trail = append(trail, fmt.Sprintf("%s/%s", ev.Action, ev.ActorKind))
	}
	want := []string{"rollout.create/token", "rollout.pause/rollout", "rollout.resume/token", "rollout.advance/token", "rollout.pause/token", "rollout.abort/token", "rollout.revert/rollout",
		"switch.on/rollout", "switch.on/rollout", "switch.on/rollout", "switch.restore/rollout"}
	if !slices.Equal(trail, want) {
		t.Fatalf("audit trail\n %v\nwant\n %v", trail, want)
	}
}

// TestRolloutTurnOff: recovery is a change too — a switch on for
// everyone is turned off in stages, 50 % → hold → off, with the same
// gates.
func TestRolloutTurnOff(t *testing.T) {
	const app = "checkout"
	e := newEnv(t)
	clk := &testClock{}
	c := e.startWith(clk.option())
	waitLeader(t, c)
	mustStatus(t, call(t, c, "POST", "/api/v1/apps/"+app+"/switches", adminToken, `{"name":"reco","level":"L3","reason":"seed"}`), 201)
	mustStatus(t, call(t, c, "POST", "/api/v1/apps/checkout/switches/reco/on", adminToken, `{"reason":"INC-3","rollout":{"percent":100}}`), 200)
	ids := []string{"d-1", "d-2", "d-3", "d-4", "d-5", "d-6"}
	clients := e.startClients(app, "reco", ids, nil)
	waitFleet(t, c, app, len(ids))
	if r := call(t, c, "POST", "/api/v1/apps/checkout/rollouts", adminToken, `{"switch":"reco","template":"canaries","direction":"off","reason":"r"}`); r.Status != 400 || r.str("field") != "template" {
		t.Fatalf("canaries off: %d %s", r.Status, r.Raw)
	}
	id := startPlan(t, c, app, `{"switch":"reco","direction":"off","template":"default","reason":"INC-3 resolved"}`)
	v := waitPlan(t, c, app, id, 20*time.Second, "50 % converges", func(v rollout.View) bool { return converged(v, 0) })
	s := step(v, 0)
	var half []string
	for _, id := range ids {
		if wire.Bucket(app, "reco", id) < 5000 {
			half = append(half, id)
		}
	}
	// Narrowing, the step waits for every instance that leaves: the
	// previous target, all six.
	if s.Targeted != len(ids) || s.Applied != len(ids) || !slices.Equal(answeringOn(clients), half) {
		t.Fatalf("step 1: applied %d/%d, on %v, want %v", s.Applied, s.Targeted, answeringOn(clients), half)
	}
	clk.advance(5 * time.Minute)
	v = waitPlan(t, c, app, id, 20*time.Second, "done", func(v rollout.View) bool { return v.State == rollout.Done })
	if st, _ := switchState(t, c, app, "reco"); st.State != wire.StateOff {
		t.Fatalf("after the plan: %+v", st)
	}
	if s := step(v, 1); !s.Off || s.Targeted != len(half) {
		t.Fatalf("off step: %+v (it waits for the %d instances still on)", s.StepRecord, len(half))
	}
	if on := answeringOn(clients); len(on) != 0 {
		t.Fatalf("still on: %v", on)
	}
	changes := planChanges(t, c, app, "reco", rollout.Cause(app, "reco", id))
	if len(changes) != 2 || changes[0].Action != audit.SwitchOn || changes[1].Action != audit.SwitchOff {
		t.Fatalf("changes %+v", changes)
	}
}

// rolloutSnapshot is what a rejected rollout request must leave as it
// was: the base's counts (rows, etcd keys, audit events) and the plans,
// findings and notifications, with every plan's version.
type rolloutSnapshot struct {
	base                             snapshot
	rollouts, findings, notification int64
	versions                         int64
}

func (e *env) rolloutSnapshot(t *testing.T, c *console.Console) rolloutSnapshot {
	t.Helper()
	var versions struct{ N int64 }
	if err := c.DB.Raw("SELECT COALESCE(SUM(version), 0) AS n FROM rollouts").Scan(&versions).Error; err != nil {
		t.Fatal(err)
	}
	return rolloutSnapshot{e.snapshot(t, c.DB), count(t, c, "rollouts", "1 = 1"), count(t, c, "findings", "1 = 1"), count(t, c, "notifications", "1 = 1"), versions.N}
}

// TestRolloutBadInput: every bad rollout request is refused with a
// problem document naming the field, and changes no row, etcd key or
// audit event.
func TestRolloutBadInput(t *testing.T) {
	e := newEnv(t)
	c := e.start()
	waitLeader(t, c)
	for _, name := range []string{"search", "busy", "wide"} {
		mustStatus(t, call(t, c, "POST", "/api/v1/apps/checkout/switches", adminToken, `{"name":"`+name+`","level":"L3","reason":"seed"}`), 201)
	}
	mustStatus(t, call(t, c, "POST", "/api/v1/apps/checkout/switches/wide/on", adminToken, `{"reason":"seed","rollout":{"percent":60}}`), 200)
	viewerTok := mustStatus(t, call(t, c, "POST", "/api/v1/tokens", adminToken, `{"name":"viewer","role":"viewer","reason":"read only"}`), 201).str("token")
	opTok := mustStatus(t, call(t, c, "POST", "/api/v1/tokens", adminToken, `{"name":"ops","role":"operator","apps":["payments"],"reason":"payments team"}`), 201).str("token")
	// A plan that waits for ever at its first step: no instance is live.
	busy := startPlan(t, c, "checkout", `{"switch":"busy","template":"default","reason":"seed"}`)
	waitPlan(t, c, "checkout", busy, 20*time.Second, "the busy plan waits for an instance", func(v rollout.View) bool {
		return strings.Contains(v.Note, "needs at least one")
	})
	plans := "/api/v1/apps/checkout/rollouts"
	busyURL := fmt.Sprintf("%s/%d", plans, busy)
	cond := func(source, query string) string {
		return `{"switch":"search","template":"default","reason":"r","gate":{"conditions":[{"source":"` + source + `","query":` + strconv.Quote(query) + `,"op":"<","threshold":1}]}}`
	}
	version := plan(t, c, "checkout", busy).Version
	cases := []struct {
		name, method, path, token, body string
		status                          int
		field                           string
	}{
		{"unknown switch", "POST", plans, adminToken, `{"switch":"nope","template":"default","reason":"r"}`, 400, "switch"},
		{"bad switch name", "POST", plans, adminToken, `{"switch":"No Way","template":"default","reason":"r"}`, 400, "switch"},
		{"percent above 100", "POST", plans, adminToken, `{"switch":"search","steps":[{"percent":101}],"reason":"r"}`, 400, "steps[0].percent"},
		{"percent below 0", "POST", plans, adminToken, `{"switch":"search","steps":[{"percent":-1}],"reason":"r"}`, 400, "steps[0].percent"},
		{"percent not increasing", "POST", plans, adminToken, `{"switch":"search","steps":[{"percent":50},{"percent":5}],"reason":"r"}`, 400, "steps[1].percent"},
		{"percent of the wrong type", "POST", plans, adminToken, `{"switch":"search","steps":[{"percent":"5"}],"reason":"r"}`, 400, "steps[0].percent"},
		{"negative hold", "POST", plans, adminToken, `{"switch":"search","steps":[{"percent":5,"hold":"-5m"}],"reason":"r"}`, 400, "steps[0].hold"},
		{"unknown source", "POST", plans, adminToken, cond("graphite", "x"), 400, "gate.conditions[0].source"},
		{"prometheus not configured", "POST", plans, adminToken, cond("prometheus", "up"), 400, "gate.conditions[0].source"},
		{"fleet query that does not parse", "POST", plans, adminToken, cond("fleet", `degraded_rate{switch=search`), 400, "gate.conditions[0].query"},
		{"unknown fleet metric", "POST", plans, adminToken, cond("fleet", `latency{switch="search"}`), 400, "gate.conditions[0].query"},
		{"two active plans", "POST", plans, adminToken, `{"switch":"busy","template":"default","reason":"r"}`, 409, "switch"},
		{"template and steps", "POST", plans, adminToken, `{"switch":"search","template":"default","steps":[{"percent":5}],"reason":"r"}`, 400, "steps"},
		{"unknown template", "POST", plans, adminToken, `{"switch":"search","template":"yolo","reason":"r"}`, 400, "template"},
		{"first step narrows the switch", "POST", plans, adminToken, `{"switch":"wide","template":"default","reason":"r"}`, 400, "template"},
		{"turn off an off switch", "POST", plans, adminToken, `{"switch":"search","direction":"off","template":"default","reason":"r"}`, 400, "direction"},
		{"bad on_no_data", "POST", plans, adminToken, `{"switch":"search","template":"default","gate":{"on_no_data":"shrug"},"reason":"r"}`, 400, "gate.on_no_data"},
		{"min_applied above 1", "POST", plans, adminToken, `{"switch":"search","template":"default","gate":{"min_applied":2},"reason":"r"}`, 400, "gate.min_applied"},
		{"unknown field", "POST", plans, adminToken, `{"switch":"search","template":"default","colour":"red","reason":"r"}`, 400, "colour"},
		{"missing reason", "POST", plans, adminToken, `{"switch":"search","template":"default"}`, 400, "reason"},
		{"reason with a newline", "POST", plans, adminToken, `{"switch":"search","template":"default","reason":"a\nb"}`, 400, "reason"},
		{"empty body", "POST", plans, adminToken, ` `, 400, "body"},
		{"bad app", "POST", "/api/v1/apps/Check%20Out/rollouts", adminToken, `{"switch":"search","template":"default","reason":"r"}`, 400, "app"},
		{"viewer starts a plan", "POST", plans, viewerTok, `{"switch":"search","template":"default","reason":"r"}`, 403, ""},
		{"operator without grant", "POST", plans, opTok, `{"switch":"search","template":"default","reason":"r"}`, 403, ""},
		{"unknown plan", "POST", plans + "/999/pause", adminToken, `{"reason":"r"}`, 404, ""},
		{"plan of another app", "POST", "/api/v1/apps/payments/rollouts/" + strconv.FormatInt(busy, 10) + "/pause", adminToken, `{"reason":"r"}`, 404, ""},
		{"bad plan id", "POST", plans + "/x/pause", adminToken, `{"reason":"r"}`, 400, "id"},
		{"pause without reason", "POST", busyURL + "/pause", adminToken, `{}`, 400, "reason"},
		{"stale plan version", "POST", busyURL + "/pause", adminToken, fmt.Sprintf(`{"reason":"r","version":%d}`, version+7), 409, "version"},
		{"resume a running plan", "POST", busyURL + "/resume", adminToken, `{"reason":"r"}`, 409, ""},
		{"revert on a pause", "POST", busyURL + "/pause", adminToken, `{"reason":"r","revert":true}`, 400, "revert"},
		{"viewer aborts", "POST", busyURL + "/abort", viewerTok, `{"reason":"r"}`, 403, ""},
		{"bad list filter", "GET", plans + "?active=maybe", adminToken, "", 400, "active"},
		{"bad list limit", "GET", plans + "?limit=0", adminToken, "", 400, "limit"},
	}
	before := e.rolloutSnapshot(t, c)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mustProblem(t, call(t, c, tc.method, tc.path, tc.token, tc.body), tc.status, tc.field)
		})
	}
	if after := e.rolloutSnapshot(t, c); after != before {
		t.Fatalf("rejected requests changed state:\nbefore %+v\nafter  %+v", before, after)
	}
	// A request with several bad fields lists them all.
	r := call(t, c, "POST", plans, adminToken, `{"switch":"search","steps":[{"percent":150,"hold":"-1s"},{"percent":5}],"on_failure":"explode","reason":"r"}`)
	var p struct{ Errors []struct{ Field string } }
	_ = json.Unmarshal([]byte(r.Raw), &p)
	var fields []string
	for _, f := range p.Errors {
		fields = append(fields, f.Field)
	}
	if r.Status != 400 || !slices.Equal(fields, []string{"steps[0].percent", "steps[0].hold", "on_failure"}) {
		t.Fatalf("several bad fields: %d %v %s", r.Status, fields, r.Raw)
	}
}

// TestRolloutActivePlanIndex: the database itself refuses a second active
// plan for a switch (a unique partial index), on Postgres and on the
// embedded SQLite, and allows any number of ended ones.
func TestRolloutActivePlanIndex(t *testing.T) {
	e := newEnv(t)
	for _, db := range []struct{ name, url string }{{"postgres", e.pgURL}, {"sqlite", ""}} {
		t.Run(db.name, func(t *testing.T) {
			c := e.start(func(c *console.Config) { c.DatabaseURL = db.url })
			insert := func(state string) error {
				return c.DB.Exec(`INSERT INTO rollouts (app, switch_name, direction, state, plan, before_state, base_version, progress, version, created_by, reason, created_at, updated_at)
					VALUES ('checkout', 'idx', 'on', ?, '{}', '{}', 1, '{}', 1, 't', 'r', ?, ?)`, state, time.Now(), time.Now()).Error
			}
			for _, state := range []string{"done", "aborted", "reverted", "running"} {
				if err := insert(state); err != nil {
					t.Fatalf("%s: %v", state, err)
				}
			}
			for _, state := range []string{"pending", "running", "paused"} {
				if err := insert(state); err == nil {
					t.Fatalf("a second active plan (%s) was stored", state)
				}
			}
			if err := insert("finished"); err == nil {
				t.Fatal("an unknown state was stored")
			}
			c.DB.Exec("DELETE FROM rollouts WHERE switch_name = 'idx'")
		})
	}
}

// TestRolloutEtcdOutage: etcd goes away during a hold and stays away past
// its end. The plan cannot learn what the fleet applied, so it does not
// advance on the clock alone: its next step converges only once etcd is
// back and the instances acknowledged it, and each step is applied once.
func TestRolloutEtcdOutage(t *testing.T) {
	const app, name = "checkout", "reco"
	e := newEnv(t)
	clk := &testClock{}
	c := e.startWith(clk.option())
	waitLeader(t, c)
	mustStatus(t, call(t, c, "POST", "/api/v1/apps/"+app+"/switches", adminToken, `{"name":"reco","level":"L3","reason":"seed"}`), 201)
	clients := e.startClients(app, name, []string{"o-1", "o-2"}, nil)
	waitFleet(t, c, app, 2)
	id := startPlan(t, c, app, `{"switch":"reco","steps":[{"percent":10,"hold":"1m"},{"percent":100}],"reason":"stage"}`)
	waitPlan(t, c, app, id, 20*time.Second, "step 1 converges", func(v rollout.View) bool { return converged(v, 0) })

	e.etcd.Stop()
	clk.advance(2 * time.Minute)
	down := clk.now()
	servertest.Eventually(t, 15*time.Second, "the console knows etcd is away", func() bool { return !c.Fleet.Synced() })
	if v := plan(t, c, app, id); len(v.History) > 1 && converged(v, 1) {
		t.Fatalf("step 2 converged with etcd away: %+v", v.History[1])
	}
	e.etcd.Restart()
	back := time.Now()
	v := waitPlan(t, c, app, id, 30*time.Second, "the plan is done after the outage", func(v rollout.View) bool { return v.State == rollout.Done })
	t.Logf("done %v after etcd came back; step 2: %s", time.Since(back).Round(time.Millisecond), v.History[1].Target)
	if !v.History[1].ConvergedAt.After(down) || v.History[1].Applied != 2 {
		t.Fatalf("step 2 converged at %v (etcd went away at %v), applied %d", v.History[1].ConvergedAt, down, v.History[1].Applied)
	}
	if on := answeringOn(clients); len(on) != 2 {
		t.Fatalf("on: %v", on)
	}
	if changes := planChanges(t, c, app, name, rollout.Cause(app, name, id)); len(changes) != 2 {
		t.Fatalf("%d switch changes by the plan, want one per step", len(changes))
	}
}

// TestRolloutFirstStepWaitsForAnInstance: a plan started before any
// instance is live waits at its first step ("needs at least one"), and
// once instances join, the first step is applied again, raised so that
// one of them is in, and the plan goes on — until a person deletes the
// switch, which ends it.
func TestRolloutFirstStepWaitsForAnInstance(t *testing.T) {
	const app, name = "checkout", "reco"
	e := newEnv(t)
	c := e.start()
	waitLeader(t, c)
	mustStatus(t, call(t, c, "POST", "/api/v1/apps/"+app+"/switches", adminToken, `{"name":"reco","level":"L3","reason":"seed"}`), 201)
	id := startPlan(t, c, app, `{"switch":"reco","steps":[{"percent":1,"hold":"1h"},{"percent":100}],"reason":"stage"}`)
	v := waitPlan(t, c, app, id, 20*time.Second, "the first step waits", func(v rollout.View) bool { return strings.Contains(v.Note, "needs at least one") })
	if v.History[0].Rollout.Percent != 1 || v.History[0].Raised != "" {
		t.Fatalf("with no live instance the first step was raised: %+v", v.History[0])
	}
	clients := e.startClients(app, name, []string{"late-1", "late-2"}, nil)
	v = waitPlan(t, c, app, id, 20*time.Second, "the raised first step converges", func(v rollout.View) bool { return converged(v, 1) })
	s := step(v, 1)
	t.Logf("first step applied again: %s (%s), applied %d/%d", s.Target, s.Raised, s.Applied, s.Targeted)
	if s.Index != 0 || s.Applied != 1 || s.Targeted != 1 || len(answeringOn(clients)) != 1 || v.History[0].Outcome != rollout.OutcomeStopped {
		t.Fatalf("history %+v, on %v", v.History, answeringOn(clients))
	}
	if changes := planChanges(t, c, app, name, rollout.Cause(app, name, id)); len(changes) != 2 || !strings.Contains(changes[1].Reason, "reached none of the 2 live instances") {
		t.Fatalf("changes %+v", changes)
	}
	// A person deletes the switch: its plan ends with it, in the same
	// transaction.
	mustStatus(t, call(t, c, "DELETE", "/api/v1/apps/checkout/switches/reco?reason=retired", adminToken, ""), 200)
	if v := plan(t, c, app, id); v.State != rollout.Aborted || !strings.Contains(v.Note, "made switch.delete: the plan ends with its switch") {
		t.Fatalf("after the switch's deletion: %s %q", v.State, v.Note)
	}
}
