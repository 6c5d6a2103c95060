package trigger_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/sdk/wire"
	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/expiry"
	"github.com/switchyard-io/switchyard/server/finding"
	"github.com/switchyard-io/switchyard/server/rollout"
	"github.com/switchyard-io/switchyard/server/trigger"
)

// TestCrossActor runs the matrix of docs/design.md ("Who acts when
// another actor changed the switch") against a real database and a real
// Prometheus: each case ends with the rule's state equal to the switch's
// after one evaluation, and with the documented outcome.
func TestCrossActor(t *testing.T) {
	prom, src := startPrometheus(t)
	r := newRig(t, "postgres", prom, src)
	t.Run("expiry auto_off under a firing rule", func(t *testing.T) { r.t = t; testExpiryUnderRule(r) })
	t.Run("renew and owner edit under a rule", func(t *testing.T) { r.t = t; testMetadataUnderRule(r) })
	t.Run("renew and owner edit under a plan", func(t *testing.T) { r.t = t; testMetadataUnderPlan(r) })
	t.Run("rollout revert under a rule", func(t *testing.T) { r.t = t; testRevertUnderRule(r) })
	t.Run("abort with revert of the rule's plan", func(t *testing.T) { r.t = t; testAbortRulePlan(r) })
}

// agrees fails the test unless the rule holds the switch as it is.
func (r *rig) agrees(name string) *trigger.Status {
	r.t.Helper()
	st, sw := r.status(name), r.switchState(name)
	if st.SwitchOn != (sw.State == wire.StateOn) {
		r.t.Fatalf("rule %s says switch_on=%v; the switch is %s", name, st.SwitchOn, sw.State)
	}
	return st
}

// overridden checks the documented outcome of a rule that found its
// switch changed by another automation: locked "overridden", audited by
// the rule with the other actor named, and a trigger_overridden finding.
func (r *rig) overridden(name, by string) {
	r.t.Helper()
	st := r.agrees(name)
	if st.Phase != trigger.PhaseLocked || st.Lock != trigger.LockOverridden || !strings.Contains(st.LockWhy, by) {
		r.t.Fatalf("rule %s: %+v, want locked overridden naming %s", name, st, by)
	}
	ev := r.events("trigger/checkout/" + name)[0]
	if ev.Action != audit.TriggerLock || ev.ActorKind != audit.ActorTrigger || ev.Cause != "trigger/checkout/"+name || !strings.Contains(ev.Reason, by) {
		r.t.Fatalf("the lock is audited as %+v", ev)
	}
	if fs := r.openFindings(finding.TriggerOverridden, "trigger/checkout/"+name); len(fs) != 1 {
		r.t.Fatalf("trigger_overridden findings: %+v", fs)
	}
	if n := r.notifications("trigger.locked", "switch/checkout/"+name); n != 1 {
		r.t.Fatalf("%d trigger.locked notifications", n)
	}
}

func hot() trigger.Input {
	return trigger.Input{Trigger: trigger.CondInput{Op: ">", Threshold: f(80)}, Recover: trigger.CondInput{Op: "<", Threshold: f(60)}, Cooldown: "5m"}
}

// testExpiryUnderRule: expiry turns off (auto_off) a switch a firing rule
// holds on. The rule takes the switch as it is and locks; it does not
// turn the switch on again while the metric stays above the threshold.
func testExpiryUnderRule(r *rig) {
	t, ctx := r.t, context.Background()
	r.switchAndRule("promo", 95, hot())
	maxOn, policy := "1m", server.ExpiryAutoOff
	if _, _, err := r.core.PatchSwitch(ctx, admin, "checkout", "promo", server.SwitchPatch{Reason: "short", MaxOn: &maxOn, ExpiryPolicy: &policy}); err != nil {
		t.Fatal(err)
	}
	b := time.Now().UTC().Add(time.Second)
	r.step(b)
	if sw := r.switchState("promo"); sw.State != wire.StateOn {
		t.Fatal("did not fire")
	}
	r.clock.set(at(b, 61))
	if err := expiry.New(r.core, expiry.Config{}).Job().Step(ctx, r.term, at(b, 61)); err != nil {
		t.Fatal(err)
	}
	if sw := r.switchState("promo"); sw.State != wire.StateOff || sw.UpdatedBy != audit.ActorExpiry {
		t.Fatalf("expiry left the switch %s by %s", sw.State, sw.UpdatedBy)
	}
	r.step(at(b, 62))
	r.overridden("promo", "expiry")
	r.step(at(b, 400)) // the metric is still above 80, the cooldown is over
	if sw := r.switchState("promo"); sw.State != wire.StateOff {
		t.Fatal("an overridden rule turned the switch on again")
	}
}

// testMetadataUnderRule: a renewal and an owner edit by a person do not
// pause the rule; a level change does.
func testMetadataUnderRule(r *rig) {
	t, ctx := r.t, context.Background()
	r.switchAndRule("renewed", 95, hot())
	b := time.Now().UTC().Add(time.Second)
	r.step(b)
	r.clock.set(at(b, 5))
	if _, _, err := r.core.RenewSwitch(ctx, olga, "checkout", "renewed", server.Change{Reason: "still needed"}); err != nil {
		t.Fatal(err)
	}
	owner := "team-checkout"
	if _, _, err := r.core.PatchSwitch(ctx, olga, "checkout", "renewed", server.SwitchPatch{Reason: "owned", Owner: &owner}); err != nil {
		t.Fatal(err)
	}
	r.step(at(b, 10))
	if st := r.agrees("renewed"); st.Paused || st.Phase == trigger.PhaseLocked {
		t.Fatalf("a renewal and an owner edit stopped the rule: %+v", st)
	}
	level := wire.L4
	if _, _, err := r.core.PatchSwitch(ctx, olga, "checkout", "renewed", server.SwitchPatch{Reason: "writes must stop", Level: &level}); err != nil {
		t.Fatal(err)
	}
	r.step(at(b, 20))
	if st := r.agrees("renewed"); !st.Paused || st.PausedBy != "olga" {
		t.Fatalf("a level change did not pause the rule: %+v", st)
	}
}

// startPlan starts a person's staged rollout of switch name and applies
// its first step (1 %).
func (r *rig) startPlan(name string, now time.Time) int64 {
	r.t.Helper()
	ctx := context.Background()
	v, err := r.plans.Create(ctx, olga, "checkout", rollout.Input{Switch: name, Template: rollout.TemplateDefault, Reason: "careful"})
	if err != nil {
		r.t.Fatal(err)
	}
	r.stepPlans(now)
	if sw := r.switchState(name); sw.State != wire.StateOn || sw.Rollout().Percent != 1 {
		r.t.Fatalf("the plan's first step left the switch %s at %v%%", sw.State, sw.Rollout().Percent)
	}
	return v.ID
}

func (r *rig) stepPlans(now time.Time) {
	r.t.Helper()
	r.clock.set(now)
	if err := r.plans.Job().Step(context.Background(), r.term, now); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rig) planState(id int64) string {
	r.t.Helper()
	v, err := r.plans.Get(context.Background(), "checkout", id)
	if err != nil {
		r.t.Fatal(err)
	}
	return v.State
}

// testMetadataUnderPlan: a renewal and an owner edit by a person do not
// pause a running plan (it takes the switch's new version as its own);
// a change of the rollout does.
func testMetadataUnderPlan(r *rig) {
	t, ctx := r.t, context.Background()
	if _, _, err := r.core.CreateSwitch(ctx, admin, "checkout", server.SwitchInput{Name: "planned", Level: wire.L3, Reason: "seed"}); err != nil {
		t.Fatal(err)
	}
	b := time.Now().UTC().Add(time.Second)
	id := r.startPlan("planned", b)
	r.clock.set(at(b, 1))
	if _, _, err := r.core.RenewSwitch(ctx, olga, "checkout", "planned", server.Change{Reason: "still needed"}); err != nil {
		t.Fatal(err)
	}
	owner := "team-checkout"
	if _, _, err := r.core.PatchSwitch(ctx, olga, "checkout", "planned", server.SwitchPatch{Reason: "owned", Owner: &owner}); err != nil {
		t.Fatal(err)
	}
	r.stepPlans(at(b, 2))
	r.stepPlans(at(b, 3))
	if st := r.planState(id); st != rollout.Running {
		t.Fatalf("a renewal and an owner edit left the plan %s", st)
	}
	if _, _, err := r.core.TurnOn(ctx, olga, "checkout", "planned", server.Toggle{Reason: "all in", Rollout: &wire.Rollout{Percent: 100}}); err != nil {
		t.Fatal(err)
	}
	if st := r.planState(id); st != rollout.Paused {
		t.Fatalf("a person's rollout change left the plan %s", st)
	}
	if _, err := r.plans.Abort(ctx, olga, "checkout", id, rollout.ActionInput{Reason: "done"}); err != nil {
		t.Fatal(err)
	}
}

// testRevertUnderRule: a person's staged rollout turns on a switch whose
// rule holds it off: the rule takes the switch as it is and locks
// (overridden by the rollout); the plan's revert then puts the switch
// off, and the locked rule follows it.
func testRevertUnderRule(r *rig) {
	t, ctx := r.t, context.Background()
	r.switchAndRule("staged-by-hand", 20, hot())
	b := time.Now().UTC().Add(time.Second)
	r.step(b)
	id := r.startPlan("staged-by-hand", at(b, 1))
	r.step(at(b, 2))
	r.overridden("staged-by-hand", "rollout")
	if _, err := r.plans.Abort(ctx, olga, "checkout", id, rollout.ActionInput{Reason: "not now", Revert: true}); err != nil {
		t.Fatal(err)
	}
	r.stepPlans(at(b, 3))
	if sw := r.switchState("staged-by-hand"); sw.State != wire.StateOff {
		t.Fatalf("the revert left the switch %s", sw.State)
	}
	r.step(at(b, 4))
	r.agrees("staged-by-hand")
}

// testAbortRulePlan: a rule fires with a staged rollout; a person aborts
// the plan with revert. The rule finds its switch off and its plan gone:
// it locks (overridden), and does not start another plan.
func testAbortRulePlan(r *rig) {
	t, ctx := r.t, context.Background()
	in := hot()
	in.Rollout = &trigger.RolloutInput{Template: rollout.TemplateDefault}
	r.switchAndRule("rule-plan", 95, in)
	b := time.Now().UTC().Add(time.Second)
	r.step(b)
	plan, err := r.plans.Active(ctx, "checkout", "rule-plan")
	if err != nil || plan == nil {
		t.Fatalf("no plan: %v", err)
	}
	r.step(at(b, 1)) // the plan has not applied its first step: the rule holds the switch through it
	if st := r.status("rule-plan"); st.Phase == trigger.PhaseLocked || !st.SwitchOn {
		t.Fatalf("the rule gave up on its own pending plan: %+v", st)
	}
	r.stepPlans(at(b, 2))
	r.step(at(b, 3))
	r.agrees("rule-plan")
	if _, err := r.plans.Abort(ctx, olga, "checkout", plan.ID, rollout.ActionInput{Reason: "too risky", Revert: true}); err != nil {
		t.Fatal(err)
	}
	r.stepPlans(at(b, 4))
	if sw := r.switchState("rule-plan"); sw.State != wire.StateOff {
		t.Fatalf("abort with revert left the switch %s", sw.State)
	}
	r.step(at(b, 5))
	r.overridden("rule-plan", "rollout")
	r.step(at(b, 400))
	if p, _ := r.plans.Active(ctx, "checkout", "rule-plan"); p != nil {
		t.Fatalf("the overridden rule started plan #%d", p.ID)
	}
	b2, _ := json.Marshal(r.status("rule-plan"))
	t.Logf("rule after the abort: %s", b2)
}
