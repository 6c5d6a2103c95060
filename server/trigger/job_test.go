package trigger_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"gorm.io/gorm"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/internal/pgtest"
	"github.com/switchyard-io/switchyard/internal/promtest"
	"github.com/switchyard-io/switchyard/internal/servertest"
	"github.com/switchyard-io/switchyard/sdk/wire"
	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/finding"
	"github.com/switchyard-io/switchyard/server/fleet"
	"github.com/switchyard-io/switchyard/server/rollout"
	"github.com/switchyard-io/switchyard/server/signal"
	"github.com/switchyard-io/switchyard/server/trigger"
)

// Every request and Prometheus process a test starts ends with it.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	admin = server.Actor{Name: "token:admin", Kind: audit.ActorToken, Role: server.RoleAdmin}
	olga  = server.Actor{Name: "olga", Kind: audit.ActorUser, Role: server.RoleOperator, Apps: []string{"checkout"}}
)

// clock is the injected time of the service's bookkeeping; steps get the
// same time as their argument.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) set(t time.Time) { c.mu.Lock(); defer c.mu.Unlock(); c.t = t }

// rig is one database (Postgres or SQLite) with the console's service, the
// trigger service and its job leading term 1, and a real Prometheus
// scraping an exporter whose gauges the test sets. Time is injected: a
// step is the job's Step at the time the test names, which Prometheus
// answers with the newest value scraped before it.
type rig struct {
	t     *testing.T
	db    *gorm.DB
	core  *server.Service
	plans *rollout.Service
	svc   *trigger.Service
	job   *trigger.Job
	term  server.Term
	clock *clock
	prom  *promtest.Server
	// prefix keeps the metrics of the two dialects apart on the shared
	// Prometheus.
	prefix string
}

// startPrometheus starts a real Prometheus for the test and a source that
// asks it.
func startPrometheus(t *testing.T) (*promtest.Server, *signal.Prometheus) {
	t.Helper()
	prom := promtest.Start(t)
	src, err := signal.NewPrometheus(signal.PrometheusConfig{Address: prom.URL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(src.CloseIdleConnections)
	return prom, src
}

func newRig(t *testing.T, dialect string, prom *promtest.Server, src signal.Source) *rig {
	url := ""
	if dialect == "postgres" {
		url = pgtest.NewDatabase(t)
	}
	db := servertest.OpenDB(t, url, t.TempDir())
	c := &clock{t: time.Now().UTC()}
	core := server.NewService(db, nil, server.WithClock(c.Now))
	// The fleet model is never started: no instance acks a plan's step,
	// so a plan stays at its first step, which is all these tests need.
	plans := rollout.New(rollout.Config{Service: core, Fleet: fleet.New(fleet.Config{}), Sources: signal.Sources{Prometheus: src}})
	svc := trigger.New(core, signal.Sources{Prometheus: src}, trigger.Config{Interval: 10 * time.Second, Plans: plans})
	core.OnPersonChange(plans.OnPersonChange)
	core.OnPersonChange(svc.OnPersonChange)
	r := &rig{t: t, db: db, core: core, plans: plans, svc: svc, job: svc.Job(), term: server.Term{Rev: 1, Holder: "test"}, clock: c, prom: prom, prefix: dialect + "_"}
	if err := core.ClaimTerm(context.Background(), r.term); err != nil {
		t.Fatal(err)
	}
	return r
}

// switchAndRule creates switch checkout/<name> and the rule <name> on it
// with in's settings, querying the gauge <prefix><name> set to start; the
// rule is deleted when the test ends, so later steps leave it alone.
func (r *rig) switchAndRule(name string, start float64, in trigger.Input) (metric string) {
	r.t.Helper()
	ctx := context.Background()
	if _, _, err := r.core.CreateSwitch(ctx, admin, "checkout", server.SwitchInput{Name: name, Level: wire.L3, Reason: "seed"}); err != nil {
		r.t.Fatal(err)
	}
	metric = r.prefix + strings.ReplaceAll(name, "-", "_")
	r.set(metric, start)
	in.Name, in.Switch, in.Source, in.Query, in.Reason = name, name, signal.SourcePrometheus, "max("+metric+")", "test rule"
	if _, err := r.svc.Create(ctx, admin, "checkout", in); err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() {
		_ = r.svc.Delete(context.Background(), admin, "checkout", name, server.Change{Reason: "end of test"})
	})
	return metric
}

// set sets a gauge and waits until Prometheus has scraped it.
func (r *rig) set(metric string, v float64) {
	r.t.Helper()
	r.prom.Exporter.Set(metric, v)
	r.prom.Sync(r.t)
}

// step runs the job at now.
func (r *rig) step(now time.Time) {
	r.t.Helper()
	r.clock.set(now)
	if err := r.job.Step(context.Background(), r.term, now); err != nil {
		r.t.Fatalf("step at %s: %v", now.Format(time.RFC3339), err)
	}
}

func (r *rig) status(name string) *trigger.Status {
	r.t.Helper()
	v, err := r.svc.Get(context.Background(), "checkout", name)
	if err != nil {
		r.t.Fatal(err)
	}
	return v.Status
}

func (r *rig) switchState(name string) *server.Switch {
	r.t.Helper()
	sw, err := r.core.GetSwitch(context.Background(), "checkout", name)
	if err != nil {
		r.t.Fatal(err)
	}
	return sw
}

func (r *rig) events(target string) []audit.Event {
	r.t.Helper()
	evs, _, err := r.core.ListAudit(context.Background(), audit.Filter{Target: target, Limit: 100})
	if err != nil {
		r.t.Fatal(err)
	}
	return evs
}

func (r *rig) notifications(kind, target string) int64 {
	r.t.Helper()
	var n int64
	if err := r.db.Table("notifications").Where("kind = ? AND target = ?", kind, target).Count(&n).Error; err != nil {
		r.t.Fatal(err)
	}
	return n
}

func (r *rig) evaluations(name string) []trigger.Evaluation {
	r.t.Helper()
	evs, _, err := r.svc.Evaluations(context.Background(), "checkout", name, server.Page{})
	if err != nil {
		r.t.Fatal(err)
	}
	return evs
}

func (r *rig) openFindings(kind finding.Kind, target string) []finding.Finding {
	r.t.Helper()
	fs, err := finding.List(r.db, finding.Filter{Kind: kind, Target: target, Open: true})
	if err != nil {
		r.t.Fatal(err)
	}
	return fs
}

func f(v float64) *float64 { return &v }

// seconds is the time s seconds after base.
func at(base time.Time, s int) time.Time { return base.Add(time.Duration(s) * time.Second) }

// TestJob runs the leader job against real databases and a real
// Prometheus with injected time: it fires and recovers through the
// audited change path with the evidence in the audit log, locks on
// flapping with a finding, hands off at max_on, waits for a person under
// confirm_recovery, pauses when a person changes the switch, and changes
// nothing in dry run.
func TestJob(t *testing.T) {
	prom, src := startPrometheus(t)
	for _, dialect := range []string{"postgres", "sqlite"} {
		t.Run(dialect, func(t *testing.T) {
			r := newRig(t, dialect, prom, src)
			t.Run("fires and recovers with why", func(t *testing.T) { r.t = t; testFiresAndRecovers(r) })
			t.Run("flapping locks", func(t *testing.T) { r.t = t; testFlappingLocks(r) })
			t.Run("max_on hands off", func(t *testing.T) { r.t = t; testMaxOnHandsOff(r) })
			t.Run("confirm recovery", func(t *testing.T) { r.t = t; testConfirmRecovery(r) })
			t.Run("a person's change pauses", func(t *testing.T) { r.t = t; testPersonPauses(r) })
			t.Run("dry run changes nothing", func(t *testing.T) { r.t = t; testDryRun(r) })
			t.Run("staged rollout", func(t *testing.T) { r.t = t; testStagedRollout(r) })
		})
	}
}

func testFiresAndRecovers(r *rig) {
	t := r.t
	cpu := r.switchAndRule("cpu-high", 50, trigger.Input{
		Trigger:  trigger.CondInput{Op: ">", Threshold: f(80), For: "30s"},
		Recover:  trigger.CondInput{Op: "<", Threshold: f(60), For: "1m"},
		Cooldown: "0s", Rollout: &trigger.RolloutInput{Percent: 25},
	})
	b := time.Now().UTC().Add(time.Second)
	r.step(b)
	r.set(cpu, 91.5)
	for _, s := range []int{10, 20, 30} {
		r.step(at(b, s))
	}
	if st := r.status("cpu-high"); st.Phase != trigger.PhasePendingOn || !st.Since.Equal(at(b, 10)) {
		t.Fatalf("after 20 s above 80: %+v", st)
	}
	r.step(at(b, 40))
	sw := r.switchState("cpu-high")
	if sw.State != wire.StateOn || sw.Rollout().Percent != 25 || sw.UpdatedBy != audit.ActorTrigger {
		t.Fatalf("30 s after the crossing the switch is %s at %v%% by %s", sw.State, sw.Rollout().Percent, sw.UpdatedBy)
	}
	on := r.events("switch/checkout/cpu-high")[0]
	if on.Action != audit.SwitchOn || on.ActorKind != audit.ActorTrigger || on.Cause != "trigger/checkout/cpu-high" ||
		!strings.Contains(on.Reason, "max("+cpu+")") || !strings.Contains(on.Reason, "> 80 for 30s") || !strings.Contains(on.Reason, "4 values 91.5…91.5") {
		t.Fatalf("the switch's own event does not say why: %+v", on)
	}
	tr := r.events("trigger/checkout/cpu-high")[0]
	var why struct {
		Action  string
		Query   string
		Trigger struct{ Threshold float64 }
		Recover struct{ Threshold float64 }
		Window  struct {
			Values int
			Min    float64
			From   time.Time
		}
		Value float64
	}
	if err := json.Unmarshal([]byte(tr.After), &why); err != nil || tr.Action != audit.TriggerTransition || tr.ActorKind != audit.ActorTrigger {
		t.Fatalf("transition event %+v: %v", tr, err)
	}
	if why.Action != "turn_on" || why.Query != "max("+cpu+")" || why.Trigger.Threshold != 80 || why.Recover.Threshold != 60 ||
		why.Window.Values != 4 || why.Window.Min != 91.5 || !why.Window.From.Equal(at(b, 10)) || why.Value != 91.5 {
		t.Fatalf("the transition does not record the query, window, values and thresholds: %s", tr.After)
	}
	if n := r.notifications("trigger.fired", "switch/checkout/cpu-high"); n != 1 {
		t.Fatalf("%d trigger.fired notifications", n)
	}
	t.Logf("why it fired (switch.on reason): %s", on.Reason)

	r.set(cpu, 42)
	r.step(at(b, 50))
	r.step(at(b, 100))
	if sw := r.switchState("cpu-high"); sw.State != wire.StateOn {
		t.Fatal("off before recover.for passed")
	}
	r.step(at(b, 110))
	if sw := r.switchState("cpu-high"); sw.State != wire.StateOff {
		t.Fatalf("1 m below 60: the switch is still %s", sw.State)
	}
	if n := r.notifications("trigger.recovered", "switch/checkout/cpu-high"); n != 1 {
		t.Fatalf("%d trigger.recovered notifications", n)
	}
	evs := r.evaluations("cpu-high")
	if len(evs) != 8 || evs[0].Action != trigger.ActTurnOff || evs[0].Value == nil || *evs[0].Value != 42 || evs[3].Action != trigger.ActTurnOn {
		t.Fatalf("evaluations: %+v", evs)
	}
	if res, err := r.core.VerifyAudit(context.Background()); err != nil || !res.OK() {
		t.Fatalf("audit chain: %+v %v", res, err)
	}
}

func testFlappingLocks(r *rig) {
	t := r.t
	m := r.switchAndRule("flappy", 90, trigger.Input{
		Trigger: trigger.CondInput{Op: ">", Threshold: f(80)}, Recover: trigger.CondInput{Op: "<", Threshold: f(70)},
		Cooldown: "0s", Flap: &trigger.FlapInput{MaxTransitions: new(2), Window: "10m"},
	})
	b := time.Now().UTC().Add(time.Second)
	r.step(b) // on
	r.set(m, 65)
	r.step(at(b, 10)) // off
	r.set(m, 90)
	r.step(at(b, 20)) // a third flip in 10 m: locked instead
	st := r.status("flappy")
	if st.Phase != trigger.PhaseLocked || st.Lock != trigger.LockFlapping || !strings.Contains(st.LockWhy, "2 flips within 10m") {
		t.Fatalf("after two flips and a third crossing: %+v", st)
	}
	if sw := r.switchState("flappy"); sw.State != wire.StateOff {
		t.Fatalf("the lock changed the switch: %s", sw.State)
	}
	if fs := r.openFindings(finding.TriggerLocked, "trigger/checkout/flappy"); len(fs) != 1 || fs[0].Severity != finding.Warning {
		t.Fatalf("findings: %+v", fs)
	}
	if n := r.notifications("trigger.locked", "switch/checkout/flappy"); n != 1 {
		t.Fatalf("%d trigger.locked notifications", n)
	}
	if ev := r.events("trigger/checkout/flappy")[0]; ev.Action != audit.TriggerLock {
		t.Fatalf("newest event of the rule: %s", ev.Action)
	}
	n := len(r.evaluations("flappy"))
	r.step(at(b, 30))
	if len(r.evaluations("flappy")) != n {
		t.Fatal("a locked rule was evaluated")
	}
	if _, err := r.svc.Resume(context.Background(), olga, "checkout", "flappy", server.Change{Reason: "looked at it: the threshold is fine"}); err != nil {
		t.Fatal(err)
	}
	if fs := r.openFindings(finding.TriggerLocked, "trigger/checkout/flappy"); len(fs) != 0 {
		t.Fatalf("resume left the finding open: %+v", fs)
	}
	if st := r.status("flappy"); st.Phase != trigger.PhaseOK || st.Flips != 0 {
		t.Fatalf("resumed: %+v", st)
	}
}

func testMaxOnHandsOff(r *rig) {
	t := r.t
	r.switchAndRule("capped", 95, trigger.Input{
		Trigger: trigger.CondInput{Op: ">", Threshold: f(80)}, Recover: trigger.CondInput{Op: "<", Threshold: f(60)}, MaxOn: "1m",
	})
	b := time.Now().UTC().Add(time.Second)
	r.step(b)
	r.step(at(b, 30))
	r.step(at(b, 60))
	st := r.status("capped")
	if st.Phase != trigger.PhaseLocked || st.Lock != trigger.LockMaxOn {
		t.Fatalf("after max_on: %+v", st)
	}
	if sw := r.switchState("capped"); sw.State != wire.StateOn {
		t.Fatal("max_on turned the switch off: a hand-off must never be silently off")
	}
	fs := r.openFindings(finding.TriggerHandoff, "trigger/checkout/capped")
	if len(fs) != 1 || fs[0].Severity != finding.Critical || !strings.Contains(fs[0].Summary, "handed it to a person") {
		t.Fatalf("hand-off findings: %+v", fs)
	}
	if n := r.notifications("trigger.locked", "switch/checkout/capped"); n != 1 {
		t.Fatalf("%d notifications", n)
	}
}

func testConfirmRecovery(r *rig) {
	t := r.t
	ctx := context.Background()
	m := r.switchAndRule("careful", 90, trigger.Input{
		Trigger: trigger.CondInput{Op: ">", Threshold: f(80)}, Recover: trigger.CondInput{Op: "<", Threshold: f(60), For: "20s"},
		Cooldown: "0s", ConfirmRecovery: true,
	})
	b := time.Now().UTC().Add(time.Second)
	r.step(b)
	if _, err := r.svc.Confirm(ctx, olga, "checkout", "careful", server.Change{Reason: "ok"}); !errors.Is(err, server.ErrConflict) {
		t.Fatalf("confirm with no proposal: %v", err)
	}
	r.set(m, 40)
	r.step(at(b, 10))
	r.step(at(b, 30))
	if st := r.status("careful"); st.Phase != trigger.PhaseAwaiting {
		t.Fatalf("20 s below 60 with confirm_recovery: %+v", st)
	}
	r.step(at(b, 300))
	if sw := r.switchState("careful"); sw.State != wire.StateOn {
		t.Fatal("turned off without a person's confirmation")
	}
	if n := r.notifications("trigger.proposes_recovery", "switch/checkout/careful"); n != 1 {
		t.Fatalf("%d proposals notified", n)
	}
	if _, err := r.svc.Confirm(ctx, olga, "checkout", "careful", server.Change{Reason: "dashboards agree: recovered"}); err != nil {
		t.Fatal(err)
	}
	if ev := r.events("trigger/checkout/careful")[0]; ev.Action != audit.TriggerConfirm || ev.Actor != "olga" {
		t.Fatalf("confirmation audited as %+v", ev)
	}
	r.step(at(b, 310))
	sw := r.switchState("careful")
	off := r.events("switch/checkout/careful")[0]
	if sw.State != wire.StateOff || off.ActorKind != audit.ActorTrigger || !strings.Contains(off.Reason, "recovery confirmed by olga") {
		t.Fatalf("after the confirmation: %s, %+v", sw.State, off)
	}
	if st := r.status("careful"); st.Paused {
		t.Fatal("the rule's own turn-off paused it")
	}
}

func testPersonPauses(r *rig) {
	t := r.t
	ctx := context.Background()
	m := r.switchAndRule("humans", 90, trigger.Input{
		Trigger: trigger.CondInput{Op: ">", Threshold: f(80)}, Recover: trigger.CondInput{Op: "<", Threshold: f(60)}, Cooldown: "0s",
	})
	b := time.Now().UTC().Add(time.Second)
	r.step(b)
	if sw := r.switchState("humans"); sw.State != wire.StateOn {
		t.Fatal("did not fire")
	}
	r.clock.set(at(b, 5))
	if _, _, err := r.core.TurnOff(ctx, olga, "checkout", "humans", server.Toggle{Reason: "the metric lies: a scrape bug"}); err != nil {
		t.Fatal(err)
	}
	st := r.status("humans")
	if !st.Paused || st.PausedBy != "olga" || !strings.Contains(st.PauseReason, "switch.off") {
		t.Fatalf("a person's change did not pause the rule: %+v", st)
	}
	pause := r.events("trigger/checkout/humans")[0]
	if pause.Action != audit.TriggerPause || pause.Actor != "olga" {
		t.Fatalf("the pause is audited as %+v", pause)
	}
	n := len(r.evaluations("humans"))
	r.step(at(b, 10)) // still 90: a running rule would turn it on again
	if sw := r.switchState("humans"); sw.State != wire.StateOff || len(r.evaluations("humans")) != n {
		t.Fatal("a paused rule acted")
	}
	if _, err := r.svc.Pause(ctx, olga, "checkout", "humans", server.Change{Reason: "again"}); !errors.Is(err, server.ErrConflict) {
		t.Fatalf("pausing a paused rule: %v", err)
	}
	r.set(m, 95)
	if _, err := r.svc.Resume(ctx, olga, "checkout", "humans", server.Change{Reason: "scrape fixed"}); err != nil {
		t.Fatal(err)
	}
	r.step(at(b, 20))
	if sw := r.switchState("humans"); sw.State != wire.StateOn {
		t.Fatal("a resumed rule did not act")
	}
}

func testDryRun(r *rig) {
	t := r.t
	var before, notes int64
	r.db.Table("audit_events").Count(&before)
	r.db.Table("notifications").Count(&notes)
	m := r.switchAndRule("shadow", 90, trigger.Input{
		Trigger: trigger.CondInput{Op: ">", Threshold: f(80)}, Recover: trigger.CondInput{Op: "<", Threshold: f(60)}, Cooldown: "0s", Mode: trigger.ModeDryRun,
	})
	b := time.Now().UTC().Add(time.Second)
	r.step(b)
	r.set(m, 30)
	r.step(at(b, 10))
	evs := r.evaluations("shadow")
	if len(evs) != 2 || evs[1].Action != trigger.ActTurnOn || evs[0].Action != trigger.ActTurnOff || !evs[0].DryRun || !evs[1].DryRun {
		t.Fatalf("dry run did not record what it would have done: %+v", evs)
	}
	var after, notesAfter int64
	r.db.Table("audit_events").Count(&after)
	r.db.Table("notifications").Count(&notesAfter)
	if sw := r.switchState("shadow"); sw.State != wire.StateOff || sw.Version != 1 {
		t.Fatalf("dry run changed the switch: %s v%d", sw.State, sw.Version)
	}
	if after != before+2 || notesAfter != notes { // the switch's and the rule's creation
		t.Fatalf("dry run wrote %d audit events and %d notifications beyond the two creations", after-before-2, notesAfter-notes)
	}
	t.Logf("dry run recorded: %q / %q", evs[1].Why, evs[0].Why)
}

// testStagedRollout: a rule whose rollout is a template starts that staged
// rollout when it fires, instead of turning the switch on for everyone,
// and ends it when it recovers; both are audited as the trigger's.
func testStagedRollout(r *rig) {
	t := r.t
	ctx := context.Background()
	m := r.switchAndRule("staged", 50, trigger.Input{
		Trigger: trigger.CondInput{Op: ">", Threshold: f(80)}, Recover: trigger.CondInput{Op: "<", Threshold: f(60)},
		Cooldown: "0s", Rollout: &trigger.RolloutInput{Template: rollout.TemplateDefault},
	})
	if v, err := r.svc.Get(ctx, "checkout", "staged"); err != nil || v.Rollout == nil || v.Rollout.Template != rollout.TemplateDefault || v.Rollout.Percent != 0 {
		t.Fatalf("the rule's rollout: %+v, %v", v.Rollout, err)
	}
	b := time.Now().UTC().Add(time.Second)
	r.step(b)
	r.set(m, 95)
	r.step(at(b, 10))
	plan, err := r.plans.Active(ctx, "checkout", "staged")
	if err != nil || plan == nil {
		t.Fatalf("no staged rollout after the rule fired: %v", err)
	}
	var percents []float64
	for _, s := range plan.Steps {
		percents = append(percents, s.Percent)
	}
	if plan.CreatedBy != audit.ActorTrigger || !strings.HasPrefix(plan.Reason, "trigger staged on max(") || len(percents) != 3 || percents[0] != 1 || percents[1] != 50 || percents[2] != 100 {
		t.Fatalf("plan by %s (%q) with steps %v, want the trigger's 1 → 50 → 100", plan.CreatedBy, plan.Reason, percents)
	}
	if sw := r.switchState("staged"); sw.State != wire.StateOff {
		t.Fatalf("the switch went %s at once; the plan's first step turns it on", sw.State)
	}
	if st := r.status("staged"); st.Phase != trigger.PhaseOn {
		t.Fatalf("rule phase %s after firing", st.Phase)
	}

	// Only the plan's own starter ends it this way: compared by actor kind,
	// name and cause, so neither another job nor a person called
	// "trigger" does.
	for _, other := range []server.Actor{
		server.JobActor(audit.ActorDrill, "drill/checkout/x"),
		{Name: audit.ActorTrigger, Kind: audit.ActorUser, Role: server.RoleAdmin},
		server.JobActor(audit.ActorTrigger, "trigger/checkout/another"),
	} {
		if _, err := r.core.InTerm(ctx, r.term, func(j *server.JobTx) error {
			ended, err := r.plans.EndPlan(j, other, "checkout", "staged", "not mine")
			if ended {
				return errors.New(other.Kind + " " + other.Name + " " + other.Cause + " ended the trigger's plan")
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}

	r.set(m, 20)
	r.step(at(b, 20))
	if p, err := r.plans.Active(ctx, "checkout", "staged"); err != nil || p != nil {
		t.Fatalf("the plan is still active after the rule recovered: %+v, %v", p, err)
	}
	ended, err := r.plans.Get(ctx, "checkout", plan.ID)
	if err != nil || ended.State != rollout.Aborted {
		t.Fatalf("plan after recovery: %+v, %v", ended, err)
	}
	if sw := r.switchState("staged"); sw.State != wire.StateOff {
		t.Fatalf("the switch is %s after recovery", sw.State)
	}
	evs, _, err := r.core.ListAudit(ctx, audit.Filter{TargetPrefix: "rollout/checkout/staged#", Limit: 10})
	if err != nil || len(evs) != 2 || evs[1].Action != audit.RolloutCreate || evs[0].Action != audit.RolloutAbort ||
		evs[0].ActorKind != audit.ActorTrigger || evs[1].ActorKind != audit.ActorTrigger {
		t.Fatalf("the plan's audit events: %+v, %v", evs, err)
	}

	// A merge patch that sets a percent and removes the template replaces
	// it, and null clears the rollout.
	for body, want := range map[string]string{`{"rollout":{"percent":40,"template":null}}`: "40", `{"rollout":null}`: "none"} {
		v, err := r.svc.Update(ctx, admin, "checkout", "staged", trigger.Patch{Reason: "test", Fields: json.RawMessage(body)})
		if err != nil {
			t.Fatalf("patch %s: %v", body, err)
		}
		got := "none"
		if v.Rollout != nil {
			got = strconv.FormatFloat(v.Rollout.Percent, 'f', -1, 64) + v.Rollout.Template
		}
		if got != want {
			t.Fatalf("patch %s: rollout %s, want %s", body, got, want)
		}
	}
}
