package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/internal/promtest"
	"github.com/switchyard-io/switchyard/internal/servertest"
	"github.com/switchyard-io/switchyard/sdk"
	"github.com/switchyard-io/switchyard/sdk/wire"
	"github.com/switchyard-io/switchyard/server/console"
	"github.com/switchyard-io/switchyard/server/trigger"
)

// evalInterval is the trigger interval of these tests' consoles.
const evalInterval = 500 * time.Millisecond

// withTriggers points a console at prom and evaluates every evalInterval.
func withTriggers(prom *promtest.Server) func(*console.Config) {
	return func(c *console.Config) { c.PrometheusURL, c.TriggerInterval = prom.URL, evalInterval }
}

// fleetOf starts n SDK clients of app on the env's etcd and waits until
// each has live data.
func fleetOf(t *testing.T, e *env, app string, n int) []*sdk.Client {
	t.Helper()
	out := make([]*sdk.Client, n)
	for i := range out {
		c, err := sdk.New(context.Background(), sdk.Config{Endpoints: []string{e.etcd.Endpoint}, App: app,
			InstanceID: fmt.Sprintf("%s-%02d", app, i), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		out[i] = c
	}
	for _, c := range out {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := c.WaitReady(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// allSee reports whether every client answers switch name as on.
func allSee(clients []*sdk.Client, name string, on bool) bool {
	for _, c := range clients {
		if c.Switch(name).On(context.Background()) != on {
			return false
		}
	}
	return true
}

// waitAll waits until every client answers switch name as on, and returns
// how long that took.
func waitAll(t *testing.T, clients []*sdk.Client, name string, on bool, from time.Time, within time.Duration) time.Duration {
	t.Helper()
	servertest.Eventually(t, within, fmt.Sprintf("all %d SDK clients see %s %v", len(clients), name, on), func() bool { return allSee(clients, name, on) })
	return time.Since(from)
}

// ruleBody is the JSON of a rule on a Prometheus query.
func ruleBody(name, sw, query string, extra string) string {
	return fmt.Sprintf(`{"name":%q,"switch":%q,"source":"prometheus","query":%q,%s,"reason":"protect checkout"}`, name, sw, query, extra)
}

func evaluations(t *testing.T, c *console.Console, rule string) []trigger.Evaluation {
	t.Helper()
	r := mustStatus(t, call(t, c, "GET", "/api/v1/apps/checkout/triggers/"+rule+"/evaluations?limit=300", adminToken, ""), 200)
	var body struct{ Evaluations []trigger.Evaluation }
	if err := json.Unmarshal([]byte(r.Raw), &body); err != nil {
		t.Fatal(err)
	}
	return body.Evaluations
}

func ruleStatus(t *testing.T, c *console.Console, rule string) trigger.Status {
	t.Helper()
	r := mustStatus(t, call(t, c, "GET", "/api/v1/apps/checkout/triggers/"+rule, adminToken, ""), 200)
	var body struct{ Trigger trigger.View }
	if err := json.Unmarshal([]byte(r.Raw), &body); err != nil || body.Trigger.Status == nil {
		t.Fatalf("%v: %s", err, r.Raw)
	}
	return *body.Trigger.Status
}

// TestTriggerEndToEnd: a real Prometheus scrapes an exporter whose values
// the test sets; ten SDK clients watch the switches. When the CPU crosses
// 80 the switch is on at every client within for + interval + 1 s; when it
// falls below 60 it is off after recover.for (not sooner); with Prometheus
// stopped each rule's on_error policy applies and no error is taken
// for 0: a switch that is on stays on (hold), a rule that fires on a low
// rate does not fire (hold), and a rule whose on_error is breaching turns
// its switch on.
// A dry-run rule beside them changes nothing and records what it would
// have done.
func TestTriggerEndToEnd(t *testing.T) {
	prom := promtest.Start(t)
	e := newEnv(t)
	c := e.start(withTriggers(prom))
	waitLeader(t, c)
	for _, sw := range []string{"recommend", "catalog", "reviews", "search"} {
		mustStatus(t, call(t, c, "POST", "/api/v1/apps/checkout/switches", adminToken, `{"name":"`+sw+`","level":"L3","reason":"seed"}`), 201)
	}
	exp := prom.Exporter
	exp.Set("checkout_cpu", 50)
	exp.Set("checkout_rps", 100)
	exp.Set("reviews_latency_seconds", 0.1)
	exp.Set("search_cpu", 50)
	prom.Sync(t)
	const forOn, forOff = 2 * time.Second, 3 * time.Second
	rules := []string{
		ruleBody("cpu-high", "recommend", "max(checkout_cpu)", `"trigger":{"op":">","threshold":80,"for":"2s"},"recover":{"op":"<","threshold":60,"for":"3s"},"cooldown":"0s"`),
		ruleBody("traffic-gone", "catalog", "sum(checkout_rps)", `"trigger":{"op":"<","threshold":1,"for":"1s"},"recover":{"op":">","threshold":5,"for":"1s"}`),
		ruleBody("reviews-slow", "reviews", "max(reviews_latency_seconds)", `"trigger":{"op":">","threshold":1,"for":"1s"},"recover":{"op":"<","threshold":0.5,"for":"1s"},"on_no_data":"breaching","on_error":"breaching"`),
		ruleBody("search-shadow", "search", "max(search_cpu)", `"trigger":{"op":">","threshold":80},"recover":{"op":"<","threshold":60},"cooldown":"0s","mode":"dry_run"`),
	}
	for _, body := range rules {
		mustStatus(t, call(t, c, "POST", "/api/v1/apps/checkout/triggers", adminToken, body), 201)
	}
	clients := fleetOf(t, e, "checkout", 10)
	searchKey := e.etcdValue(wire.SwitchKey("default", "checkout", "search"))

	// The CPU crosses 80.
	crossed := time.Now()
	exp.Set("checkout_cpu", 93)
	exp.Set("search_cpu", 93)
	took := waitAll(t, clients, "recommend", true, crossed, 15*time.Second)
	budget := forOn + evalInterval + time.Second
	t.Logf("value set above 80: on at all %d SDK clients after %v (for %v + interval %v + 1 s = %v)", len(clients), took.Round(time.Millisecond), forOn, evalInterval, budget)
	if took > budget {
		t.Fatalf("on after %v, budget %v", took, budget)
	}
	if took < forOn {
		t.Fatalf("on after %v, before for %v", took, forOn)
	}

	// It falls below 60.
	fell := time.Now()
	exp.Set("checkout_cpu", 41)
	took = waitAll(t, clients, "recommend", false, fell, 15*time.Second)
	budget = forOff + evalInterval + time.Second
	t.Logf("value set below 60: off at all clients after %v (recover.for %v, budget %v)", took.Round(time.Millisecond), forOff, budget)
	if took < forOff || took > budget {
		t.Fatalf("off after %v: want between recover.for %v and %v", took, forOff, budget)
	}

	// Up again, then Prometheus goes away.
	exp.Set("checkout_cpu", 95)
	waitAll(t, clients, "recommend", true, time.Now(), 15*time.Second)
	stopped := time.Now()
	prom.Stop()
	took = waitAll(t, clients, "reviews", true, stopped, 15*time.Second)
	t.Logf("Prometheus stopped: the on_error breaching rule turned reviews on at all clients after %v", took.Round(time.Millisecond))

	// Wait until cpu-high has seen errors for longer than recover.for plus
	// two intervals: long enough for a 0 to have turned it off.
	var errs []trigger.Evaluation
	servertest.Eventually(t, 20*time.Second, "cpu-high evaluates errors for recover.for + 2 intervals", func() bool {
		errs = errs[:0]
		for _, ev := range evaluations(t, c, "cpu-high") {
			if ev.At.After(stopped) {
				if ev.Outcome != trigger.OutcomeError {
					t.Fatalf("with Prometheus stopped an evaluation gave %s", ev.Outcome)
				}
				errs = append(errs, ev)
			}
		}
		return len(errs) > 1 && errs[0].At.Sub(errs[len(errs)-1].At) > forOff+2*evalInterval
	})
	for _, ev := range errs {
		if ev.Value != nil || ev.Error == "" || ev.Action != "" {
			t.Fatalf("an error evaluation carries a value or an action: %+v", ev)
		}
	}
	if !allSee(clients, "recommend", true) || !allSee(clients, "catalog", false) {
		t.Fatal("with Prometheus stopped a hold rule flipped its switch: an error was taken for 0")
	}
	st := ruleStatus(t, c, "traffic-gone")
	if st.Phase != trigger.PhaseOK || st.Last == nil || st.Last.Outcome != trigger.OutcomeError {
		t.Fatalf("traffic-gone while Prometheus is down: %+v", st)
	}
	t.Logf("Prometheus down for %v: cpu-high %d error evaluations (%q), recommend still on, catalog still off",
		errs[0].At.Sub(stopped).Round(time.Millisecond), len(errs), errs[0].Why)

	// The dry run changed nothing and recorded what it would have done.
	if got := e.etcdValue(wire.SwitchKey("default", "checkout", "search")); !jsonEq(got, searchKey) {
		t.Fatalf("dry run changed the etcd key:\n%s\n%s", searchKey, got)
	}
	if !allSee(clients, "search", false) {
		t.Fatal("dry run turned the switch on")
	}
	var would *trigger.Evaluation
	for _, ev := range evaluations(t, c, "search-shadow") {
		if ev.Action == trigger.ActTurnOn {
			would = &ev
		}
	}
	if would == nil || !would.DryRun {
		t.Fatal("the dry run did not record that it would have turned the switch on")
	}
	evs, _, err := c.Service.ListAudit(context.Background(), audit.Filter{Target: "switch/checkout/search"})
	if err != nil || len(evs) != 1 || evs[0].Action != audit.SwitchCreate {
		t.Fatalf("the dry run's switch has audit events %+v %v", evs, err)
	}
	t.Logf("dry run recorded at %s: %s", would.At.Format(time.StampMilli), would.Why)

	on, _, _ := c.Service.ListAudit(context.Background(), audit.Filter{Target: "switch/checkout/recommend", Action: audit.SwitchOn})
	if len(on) != 2 || on[0].ActorKind != audit.ActorTrigger || on[0].Cause != "trigger/checkout/cpu-high" {
		t.Fatalf("switch.on events of recommend: %+v", on)
	}
	if res, err := c.Service.VerifyAudit(context.Background()); err != nil || !res.OK() {
		t.Fatalf("audit chain: %+v %v", res, err)
	}
}

// TestTriggerLeaderKilledWhilePending: the leader (a child process) sees
// the metric cross and starts the hold; it is SIGKILLed before the hold
// ends. The surviving console takes over, resumes the hold from the
// pending-since in the database and fires at the moment the dead leader
// would have (within one interval), once.
func TestTriggerLeaderKilledWhilePending(t *testing.T) {
	prom := promtest.Start(t)
	e := newEnv(t)
	const hold = 5 * time.Second
	prom.Exporter.Set("checkout_cpu", 50)
	prom.Sync(t)
	boot := e.start(withTriggers(prom), func(c *console.Config) { c.ConsoleID = "boot" })
	mustStatus(t, call(t, boot, "POST", "/api/v1/apps/checkout/switches", adminToken, `{"name":"recommend","level":"L3","reason":"seed"}`), 201)
	mustStatus(t, call(t, boot, "POST", "/api/v1/apps/checkout/triggers", adminToken, ruleBody("cpu-high", "recommend", "max(checkout_cpu)",
		`"trigger":{"op":">","threshold":80,"for":"5s"},"recover":{"op":"<","threshold":60,"for":"1m"}`)), 201)
	stop(boot)

	dying := e.startProcess("dying", "SWITCHYARD_PROMETHEUS_URL="+prom.URL, "SWITCHYARD_TRIGGER_INTERVAL="+evalInterval.String())
	servertest.Eventually(t, 15*time.Second, "the process leads", func() bool { return electionLeader(e) == "dying" })
	survivor := e.start(withTriggers(prom), func(c *console.Config) { c.ConsoleID = "survivor" })
	servertest.Eventually(t, 15*time.Second, "the survivor campaigns", func() bool { return candidates(e) == 2 })

	prom.Exporter.Set("checkout_cpu", 95)
	var since time.Time
	servertest.Eventually(t, 10*time.Second, "the leader starts the hold", func() bool {
		st := ruleStatus(t, survivor, "cpu-high")
		since = st.Since
		return st.Phase == trigger.PhasePendingOn
	})
	died := dying.kill(t)
	due := since.Add(hold)
	if !died.Before(due) {
		t.Fatalf("the leader died %v after the hold ended: nothing to resume", died.Sub(due))
	}
	servertest.Eventually(t, 20*time.Second, "the survivor fires", func() bool {
		sw := mustStatus(t, call(t, survivor, "GET", "/api/v1/apps/checkout/switches/recommend", adminToken, ""), 200)
		return sw.str("switch", "state") == "on"
	})
	var fired []trigger.Evaluation
	for _, ev := range evaluations(t, survivor, "cpu-high") {
		if ev.Action == trigger.ActTurnOn {
			fired = append(fired, ev)
		}
	}
	on, _, err := survivor.Service.ListAudit(context.Background(), audit.Filter{Target: "switch/checkout/recommend", Action: audit.SwitchOn})
	if err != nil || len(fired) != 1 || len(on) != 1 {
		t.Fatalf("fired %d times, %d switch.on events (%v): the hold must fire once", len(fired), len(on), err)
	}
	late := fired[0].At.Sub(due)
	t.Logf("hold began %s on the dying leader, SIGKILLed %v into it; the survivor fired %v after the moment due (interval %v); switch.on audited at +%v",
		since.Format(time.StampMilli), died.Sub(since).Round(time.Millisecond), late.Round(time.Millisecond), evalInterval, on[0].At.Sub(due).Round(time.Millisecond))
	if late < 0 || late > evalInterval {
		t.Fatalf("fired %v after the moment due; want within one interval (%v)", late, evalInterval)
	}
	if !survivor.Scheduler.Leading() || on[0].ActorKind != audit.ActorTrigger || !strings.Contains(on[0].Reason, "for 5s") {
		t.Fatalf("fired by %+v", on[0])
	}
}

// TestTriggerAPI: create, read, update, pause and resume a rule through
// the API; a person turning the switch on pauses it (humans win) and the
// rule page's status says so and who; resuming hands the switch, as it
// is, back to the rule. The preview evaluates a draft rule over a real
// Prometheus's recent history and says when it would have fired and
// recovered.
func TestTriggerAPI(t *testing.T) {
	prom := promtest.Start(t)
	e := newEnv(t)
	c := e.start(withTriggers(prom))
	waitLeader(t, c)
	tr := "/api/v1/apps/checkout/triggers"
	mustStatus(t, call(t, c, "POST", "/api/v1/apps/checkout/switches", adminToken, `{"name":"recommend","level":"L3","reason":"seed"}`), 201)
	prom.Exporter.Set("api_cpu", 50)
	prom.Sync(t)
	r := mustStatus(t, call(t, c, "POST", tr, adminToken, ruleBody("cpu-high", "recommend", "max(api_cpu)",
		`"trigger":{"op":">","threshold":80,"for":"1m"},"recover":{"threshold":60,"for":"5m"},"rollout":{"percent":12.5}`)), 201)
	if r.str("trigger", "recover", "op") != "<" || r.str("trigger", "cooldown") != "1m" || r.str("trigger", "on_no_data") != "hold" ||
		r.str("trigger", "flap") != `{"max_transitions":4,"window":"1h"}` || r.str("trigger", "status", "phase") != "ok" || r.num("trigger", "rollout", "percent") != 12.5 {
		t.Fatalf("created with defaults: %s", r.Raw)
	}
	if l := mustStatus(t, call(t, c, "GET", tr, adminToken, ""), 200); !strings.Contains(l.Raw, `"name":"cpu-high"`) {
		t.Fatalf("list: %s", l.Raw)
	}
	r = mustStatus(t, call(t, c, "PATCH", tr+"/cpu-high", adminToken, `{"version":1,"trigger":{"threshold":85},"cooldown":"2m","reason":"less eager"}`), 200)
	if r.num("trigger", "trigger", "threshold") != 85 || r.str("trigger", "trigger", "for") != "1m" || r.num("trigger", "version") != 2 {
		t.Fatalf("patch merges member by member: %s", r.Raw)
	}
	evs, _, _ := c.Service.ListAudit(context.Background(), audit.Filter{Target: "trigger/checkout/cpu-high"})
	if len(evs) != 2 || evs[0].Action != audit.TriggerUpdate || !strings.Contains(evs[0].Before, `"threshold":80`) || !strings.Contains(evs[0].After, `"threshold":85`) {
		t.Fatalf("update audited as %+v", evs)
	}

	// A person turns the switch on: the rule pauses, in the same change.
	mustStatus(t, call(t, c, "POST", "/api/v1/apps/checkout/switches/recommend/on", adminToken, `{"reason":"incident: I take over"}`), 200)
	st := ruleStatus(t, c, "cpu-high")
	if st.State != "paused" || !st.Paused || st.PausedBy != "token:bootstrap#1" || !strings.Contains(st.PauseReason, "switch.on") {
		t.Fatalf("the person's change did not pause the rule: %+v", st)
	}
	evs, _, _ = c.Service.ListAudit(context.Background(), audit.Filter{Target: "trigger/checkout/cpu-high", Limit: 1})
	if evs[0].Action != audit.TriggerPause || evs[0].Actor != "token:bootstrap#1" {
		t.Fatalf("pause audited as %+v", evs[0])
	}
	mustStatus(t, call(t, c, "POST", tr+"/cpu-high/pause", adminToken, `{"reason":"twice"}`), 409)
	r = mustStatus(t, call(t, c, "POST", tr+"/cpu-high/resume", adminToken, `{"reason":"incident over, automation back"}`), 200)
	if r.str("trigger", "status", "phase") != "on" || r.str("trigger", "status", "paused") != "false" {
		t.Fatalf("resumed on a switch that is on: %s", r.Raw)
	}
	r = mustStatus(t, call(t, c, "POST", tr+"/cpu-high/pause", adminToken, `{"reason":"maintenance window"}`), 200)
	if r.str("trigger", "status", "paused_by") != "token:bootstrap#1" || r.str("trigger", "status", "pause_reason") != "maintenance window" {
		t.Fatalf("paused: %s", r.Raw)
	}

	// Preview a draft: a metric that appears, rises above 80 and falls.
	prom.Exporter.Set("draft_cpu", 50)
	syncs := func(n int) {
		for range n {
			prom.Sync(t)
		}
	}
	syncs(4)
	prom.Exporter.Set("draft_cpu", 90)
	syncs(6)
	prom.Exporter.Set("draft_cpu", 40)
	syncs(6)
	body := `{"rule":{"source":"prometheus","query":"max(draft_cpu)","trigger":{"op":">","threshold":80,"for":"1s"},"recover":{"op":"<","threshold":60,"for":"1s"},"cooldown":"0s"},"range":"1m","step":"1s"}`
	r = mustStatus(t, call(t, c, "POST", tr+"/preview", adminToken, body), 200)
	var p struct{ Preview trigger.Preview }
	if err := json.Unmarshal([]byte(r.Raw), &p); err != nil {
		t.Fatal(err)
	}
	pv := p.Preview
	if pv.Fired != 1 || pv.Recovered != 1 || pv.Transitions != 2 || pv.Final != trigger.PhaseOK || len(pv.Events) != 2 || pv.SourceError != "" {
		t.Fatalf("preview: %s", pv.String())
	}
	if len(pv.NoData) == 0 || !pv.NoData[0].From.Equal(pv.Start) || len(pv.Points) < 5 {
		t.Fatalf("the minute before the metric existed is not no data: %+v, %d points", pv.NoData, len(pv.Points))
	}
	up, down := pv.Events[0], pv.Events[1]
	if up.Action != trigger.ActTurnOn || down.Action != trigger.ActTurnOff || *up.Value != 90 || *down.Value != 40 || down.At.Sub(up.At) < 2*time.Second {
		t.Fatalf("preview events: %+v", pv.Events)
	}
	t.Logf("preview over 1m at 1s: %s; fired %s, recovered %s; no data %s–%s", pv.String(),
		up.At.Format(time.StampMilli), down.At.Format(time.StampMilli), pv.NoData[0].From.Format(time.TimeOnly), pv.NoData[0].To.Format(time.TimeOnly))

	// Prometheus away: the preview says so rather than show a calm chart.
	prom.Stop()
	r = mustStatus(t, call(t, c, "POST", tr+"/preview", adminToken, body), 200)
	if r.str("preview", "source_error") == "" || r.num("preview", "fired") != 0 {
		t.Fatalf("preview with Prometheus stopped: %s", r.Raw)
	}

	mustStatus(t, call(t, c, "DELETE", tr+"/cpu-high?reason=done", adminToken, ""), 200)
	mustStatus(t, call(t, c, "GET", tr+"/cpu-high", adminToken, ""), 404)
	var left int64
	c.DB.Table("trigger_states").Count(&left)
	if left != 0 {
		t.Fatalf("%d states left after the delete", left)
	}
}
