package trigger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"gorm.io/gorm"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/internal/oneline"
	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/finding"
	"github.com/switchyard-io/switchyard/server/fleet"
	"github.com/switchyard-io/switchyard/server/notify"
	"github.com/switchyard-io/switchyard/server/signal"
)

// Job is the leader job that evaluates every rule each interval: it asks
// each rule's source for its value at now (outside any transaction), then
// reloads the rules, their states and their switches, runs the evaluator,
// acts on the decisions through the audited change path, and stores the
// states and the evaluations. Most steps only record what each rule saw:
// all rules in one transaction without the audit chain's lock, in a
// handful of statements (batch). A step in which a rule acts (or one that
// fails) runs again rule by rule, each in a fenced transaction of its own
// (server.Service.InTermLazyAudit). A rule whose transaction fails (a
// person changed the switch meanwhile: 409) is evaluated again at the
// next step; a step of a deposed leader writes nothing.
type Job struct {
	s *Service
	// timer wakes the job when the next hold is due before the next step.
	mu    sync.Mutex
	timer *time.Timer
}

// Job returns the service's leader job.
func (s *Service) Job() *Job { return &Job{s: s} }

// Name names the job in logs.
func (*Job) Name() string { return "triggers" }

// Every is the evaluation interval.
func (j *Job) Every() time.Duration { return j.s.interval }

// Wake asks for a step before the interval ends (a confirmed recovery).
func (j *Job) Wake() <-chan struct{} { return j.s.wake }

// Step evaluates every rule that is neither paused nor locked at now.
func (j *Job) Step(ctx context.Context, t server.Term, now time.Time) error {
	s := j.s
	if err := s.syncStopped(ctx, t, now); err != nil {
		return err
	}
	rules, err := s.active(ctx)
	if err != nil {
		return err
	}
	drilled, err := s.drilled(ctx)
	if err != nil {
		return err
	}
	samples := s.query(ctx, rules, now)
	var (
		errs []error
		next time.Time // the earliest moment a rule is due
	)
	// Most steps only record what each rule saw: all of it in one
	// transaction without the audit lock. A step in which a rule acts (or
	// one that fails) runs again rule by rule, each in its own
	// transaction, so one rule cannot hold up the others.
	dues := make([]time.Time, len(rules))
	_, err = s.core.InTermStateOnly(ctx, t, func(jt *server.JobTx) error {
		b, err := readBatch(jt.DB(), rules)
		if err != nil {
			return err
		}
		for i := range rules {
			if dues[i], err = s.stepRule(jt, b, &rules[i], samples[i], drilled, now); err != nil {
				return err
			}
		}
		return b.flush(jt.DB())
	})
	switch {
	case errors.Is(err, server.ErrNotLeader):
		return err
	case err == nil:
		for _, due := range dues {
			if !due.IsZero() && (next.IsZero() || due.Before(next)) {
				next = due
			}
		}
		j.wakeAt(now, next)
		return nil
	}
	for i := range rules {
		r := &rules[i]
		var due time.Time
		_, err := s.core.InTermLazyAudit(ctx, t, func(jt *server.JobTx) error {
			b, err := readBatch(jt.DB(), rules[i:i+1])
			if err != nil {
				return err
			}
			if due, err = s.stepRule(jt, b, r, samples[i], drilled, now); err != nil {
				return err
			}
			return b.flush(jt.DB())
		})
		switch {
		case errors.Is(err, server.ErrNotLeader):
			return err
		case err != nil:
			errs = append(errs, fmt.Errorf("trigger: %s: %w", r.Target(), err))
		case !due.IsZero() && (next.IsZero() || due.Before(next)):
			next = due
		}
	}
	j.wakeAt(now, next)
	return errors.Join(errs...)
}

// wakeAt arms the job's wake for due when it comes before the next step.
func (j *Job) wakeAt(now, due time.Time) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.timer != nil {
		j.timer.Stop()
		j.timer = nil
	}
	if wait := due.Sub(now); !due.IsZero() && wait < j.s.interval {
		j.timer = time.AfterFunc(max(wait, 0), j.s.kick)
	}
}

// active returns the rules the job evaluates: neither paused nor locked.
func (s *Service) active(ctx context.Context) ([]Rule, error) {
	var rules []Rule
	err := s.db(ctx).Where("id IN (?)", s.db(ctx).Model(&stateRow{}).Select("trigger_id").
		Where("paused = ? AND phase <> ?", false, string(PhaseLocked))).Order("id").Find(&rules).Error
	return rules, err
}

// syncStopped brings the enforcing rules that are paused or locked to
// the switch as it is now, so that none shows a belief the switch
// contradicts (they do not act: Reconcile). Only a rule out of step
// costs a transaction.
func (s *Service) syncStopped(ctx context.Context, t server.Term, now time.Time) error {
	var rules []Rule
	err := s.db(ctx).Where("mode = ? AND id IN (?)", ModeEnforce, s.db(ctx).Model(&stateRow{}).Select("trigger_id").
		Where("paused = ? OR phase = ?", true, string(PhaseLocked))).Order("id").Find(&rules).Error
	if err != nil {
		return err
	}
	for i := range rules {
		r := &rules[i]
		_, st, err := loadState(s.db(ctx), r.ID)
		if err != nil {
			return err
		}
		sw, err := s.core.GetSwitch(ctx, r.App, r.SwitchName)
		if err != nil || st.On == switchOn(sw) {
			continue // a deleted switch takes its rules with it
		}
		_, err = s.core.InTermLazyAudit(ctx, t, func(j *server.JobTx) error {
			row, st, err := loadState(j.DB(), r.ID)
			if err != nil || (!st.Paused && st.Phase != PhaseLocked) {
				return err
			}
			sw, err := j.Switch(r.App, r.SwitchName)
			if err != nil {
				return err
			}
			next, _ := Reconcile(st, switchOn(sw), "", now)
			return saveState(j.DB(), row, next, nil, now)
		})
		if errors.Is(err, server.ErrNotLeader) {
			return err
		}
	}
	return nil
}

// stepRule is one rule's part of a step: held while a drill of the app
// its query reads runs, evaluated otherwise. It returns when the rule is
// due next.
func (s *Service) stepRule(j *server.JobTx, b *batch, r *Rule, smp Sample, drilled map[string]string, now time.Time) (time.Time, error) {
	if drill := heldBy(r, drilled); drill != "" {
		return time.Time{}, s.holdIn(j, b, r, smp, drill, now)
	}
	return s.evaluateIn(j, b, r, smp, now)
}

// drilled maps each app with a drill in progress to the drill's cause.
func (s *Service) drilled(ctx context.Context) (map[string]string, error) {
	if s.drills == nil {
		return nil, nil
	}
	return s.drills.Running(ctx)
}

// heldBy is the drill run that holds rule r: one of the app whose fleet
// signals its query reads. A drill changes those signals on purpose;
// taken for an incident they would turn switches on for everyone.
func heldBy(r *Rule, drilled map[string]string) string {
	if r.Source != signal.SourceFleet || len(drilled) == 0 {
		return ""
	}
	return drilled[fleet.QueryApp(r.Query, r.App)]
}

// holdIn records an evaluation of rule r held by drill: nothing is
// decided, the state stays as it is. The first held evaluation of each
// drill is audited (trigger.hold), which the drill's report lists.
func (s *Service) holdIn(j *server.JobTx, b *batch, queried *Rule, smp Sample, drill string, now time.Time) error {
	r := b.rule(queried.ID)
	if r == nil {
		return nil // deleted meanwhile
	}
	row, st, err := b.state(r.ID)
	if err != nil || st.Paused || st.Phase == PhaseLocked {
		return err
	}
	why := heldWhy(drill)
	if st.HeldBy != drill {
		st.HeldBy = drill
		reason := why + ": the rule's query reads the fleet signals the drill changes on purpose; it evaluates again when the drill ends"
		err := j.Commit(server.Audited{Actor: server.JobActor(audit.ActorTrigger, r.Cause()), Action: audit.TriggerHold, Reason: reason, App: r.App,
			Apply: func(*gorm.DB) (string, any, any, error) {
				return r.Target(), nil, map[string]string{"drill": drill, "query": r.Query}, nil
			}})
		if err != nil {
			return err
		}
	}
	if err := b.save(row, st, smp, now); err != nil {
		return err
	}
	b.evaluated(r.ID, row.Rev, smp, Decision{From: st.Phase, To: st.Phase, Why: why}, r.Mode == ModeDryRun, now)
	return nil
}

// heldWhy is how an evaluation held by drill says so.
func heldWhy(drill string) string {
	return "held: drill " + strings.TrimPrefix(drill, "drill/") + " running"
}

// HeldBy lists the rules the drill run cause held (trigger.hold events
// since the run began), for the drill's report.
func (s *Service) HeldBy(ctx context.Context, cause string, since time.Time) ([]string, error) {
	evs, _, err := audit.List(ctx, s.db(ctx), audit.Filter{Action: audit.TriggerHold, Since: since, Limit: 1000})
	if err != nil {
		return nil, err
	}
	prefix := heldWhy(cause) + ":"
	var out []string
	for _, e := range evs {
		if strings.HasPrefix(e.Reason, prefix) {
			out = append(out, strings.TrimPrefix(e.Target, "trigger/"))
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// holds reports whether the switch of enforcing rule r is on as the rule
// sees it: on as stored, or being turned on by the staged rollout the
// rule started.
func (s *Service) holds(j *server.JobTx, r *Rule, sw *server.Switch) (bool, error) {
	if switchOn(sw) || r.RolloutTemplate == "" || s.plans == nil {
		return switchOn(sw), nil
	}
	return s.plans.Runs(j, server.JobActor(audit.ActorTrigger, r.Cause()), r.App, r.SwitchName)
}

// lastChange names who made the switch's newest change and why, for a
// rule that finds the switch changed under it.
func lastChange(tx *gorm.DB, sw *server.Switch) string {
	evs, _, err := audit.List(tx.Statement.Context, tx, audit.Filter{Target: sw.Target(), Limit: 1})
	if err != nil || len(evs) == 0 {
		return sw.UpdatedBy
	}
	e := evs[0]
	who := e.Actor
	if e.Cause != "" {
		who += " (" + e.Cause + ")"
	}
	return fmt.Sprintf("%s with %s (%q)", who, e.Action, oneline.Clean(e.Reason, 200))
}

// query asks each rule's source for its value at now, concurrently and
// each within the one query timeout of server/signal: a query without an
// answer in time is an error, never 0.
func (s *Service) query(ctx context.Context, rules []Rule, now time.Time) []Sample {
	qs := make([]signal.Query, len(rules))
	for i, r := range rules {
		qs[i] = signal.Query{Source: r.Source, App: r.App, Query: r.Query}
	}
	ms := s.sources.MeasureAll(ctx, qs, now)
	out := make([]Sample, len(ms))
	for i, m := range ms {
		out[i] = Sample(m)
	}
	return out
}

// evaluateIn is one rule's evaluation inside the job's transaction: r is
// the rule as it was queried. It returns when the rule is due next (see
// Due).
func (s *Service) evaluateIn(j *server.JobTx, b *batch, queried *Rule, smp Sample, now time.Time) (time.Time, error) {
	r := b.rule(queried.ID)
	switch {
	case r == nil:
		return time.Time{}, nil // deleted meanwhile
	case r.Version != queried.Version:
		return time.Time{}, nil // changed meanwhile: its query may differ; next step
	}
	row, st, err := b.state(r.ID)
	if err != nil {
		return time.Time{}, err
	}
	if st.Paused || st.Phase == PhaseLocked {
		return time.Time{}, nil // paused by a person meanwhile
	}
	p := r.Policy(s.interval)
	dry := r.Mode == ModeDryRun
	if !dry {
		sw, err := b.switchOf(r)
		if err != nil {
			return time.Time{}, fmt.Errorf("switch %s: %w", r.SwitchTarget(), err)
		}
		on, err := s.holds(j, r, sw)
		if err != nil {
			return time.Time{}, err
		}
		if _, d := Reconcile(st, on, "", now); d.Action == ActOverridden {
			rec, d := Reconcile(st, on, lastChange(j.DB(), sw), now) // who, read only when needed
			if d, err = s.act(j, r, rec, d, smp, now); err != nil {
				return time.Time{}, err
			}
			if err := b.save(row, rec, smp, now); err != nil {
				return time.Time{}, err
			}
			b.evaluated(r.ID, row.Rev, smp, d, dry, now)
			return time.Time{}, nil
		}
	}
	st.HeldBy = "" // a drill that held the rule is over
	next, d := Evaluate(p, st, smp, now)
	if !dry && d.Action != ActNone {
		if d, err = s.act(j, r, next, d, smp, now); err != nil {
			return time.Time{}, err
		}
	}
	if err := b.save(row, next, smp, now); err != nil {
		return time.Time{}, err
	}
	b.evaluated(r.ID, row.Rev, smp, d, dry, now)
	return Due(p, next), nil
}

// transition is what the audit log (trigger.transition, trigger.lock) and
// the notifications record of a decision: why it fired, with the query,
// the window, the values that crossed and the thresholds.
type transition struct {
	Action  Action    `json:"action"`
	From    Phase     `json:"from"`
	To      Phase     `json:"to"`
	Switch  string    `json:"switch"`
	Source  string    `json:"source"`
	Query   string    `json:"query"`
	Trigger CondView  `json:"trigger"`
	Recover CondView  `json:"recover"`
	Window  Window    `json:"window"`
	Sample  Outcome   `json:"sample"`
	Value   *Num      `json:"value"`
	Error   string    `json:"error,omitempty"`
	At      time.Time `json:"at"`
	Why     string    `json:"why"`
}

// data is the transition as a notification's details.
func (t transition) data() map[string]any {
	b, _ := json.Marshal(t) // Num keeps ±Inf encodable
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}

// act carries out a decision of an enforcing rule, whose next state is
// next, inside the job's transaction and returns it with what happened
// added to Why.
func (s *Service) act(j *server.JobTx, r *Rule, next State, d Decision, smp Sample, now time.Time) (Decision, error) {
	a := server.JobActor(audit.ActorTrigger, r.Cause())
	cfg := r.config()
	tr := transition{
		Action: d.Action, From: d.From, To: d.To, Switch: r.SwitchTarget(), Source: r.Source, Query: r.Query,
		Trigger: cfg.Trigger, Recover: cfg.Recover, Window: d.Window, Sample: smp.Outcome, Value: parseValue(valueText(smp)),
		Error: oneline.Clean(smp.Err, 500), At: now.UTC(), Why: d.Why,
	}
	reason := oneline.Clean(fmt.Sprintf("trigger %s on %s: %s", r.Name, oneline.Clean(r.Query, 200), d.Why), 1000)
	event := func(kind notify.Kind, verb, title string) error {
		return notify.Enqueue(j.DB(), notify.Event{
			Key: fmt.Sprintf("%s#%s@%d", r.Target(), verb, now.UnixNano()), Kind: kind, App: r.App, Target: r.SwitchTarget(),
			Title: title, Body: reason, Data: tr.data(), At: now,
		})
	}
	audited := func(action audit.Action) error {
		return j.Commit(server.Audited{Actor: a, Action: action, Reason: reason, App: r.App,
			Apply: func(*gorm.DB) (string, any, any, error) {
				return r.Target(), map[string]Phase{"phase": d.From}, tr, nil
			}})
	}
	switch d.Action {
	case ActTurnOn, ActTurnOff:
		sw, err := j.Switch(r.App, r.SwitchName)
		if err != nil {
			return d, fmt.Errorf("switch %s: %w", r.SwitchTarget(), err)
		}
		on := d.Action == ActTurnOn
		t := server.Toggle{Reason: reason, Version: &sw.Version}
		if !on && r.RolloutTemplate != "" {
			// The staged rollout the rule started ends before the switch
			// goes off, so it cannot turn it on again.
			if err := s.endPlan(j, a, r, reason, &d); err != nil {
				return d, err
			}
		}
		switch {
		case switchOn(sw) == on:
			// Someone else's automation got there first: the rule holds the
			// switch as it is, and changes nothing.
			d.Why += "; the switch was " + onOff(on) + " already"
		case on && r.RolloutTemplate != "":
			err = s.startPlan(j, a, r, reason, &d)
		case on:
			t.Rollout = r.rollout(sw)
			_, err = j.TurnOn(a, r.App, r.SwitchName, t)
		default:
			_, err = j.TurnOff(a, r.App, r.SwitchName, t)
		}
		if err != nil {
			return d, err
		}
		tr.Why = d.Why
		if err := audited(audit.TriggerTransition); err != nil {
			return d, err
		}
		if on {
			return d, event(notify.TriggerFired, "fired", fmt.Sprintf("Trigger %s turned %s on", r.Name, r.SwitchTarget()))
		}
		return d, event(notify.TriggerRecovered, "recovered", fmt.Sprintf("Trigger %s turned %s off", r.Name, r.SwitchTarget()))
	case ActPropose:
		if err := audited(audit.TriggerTransition); err != nil {
			return d, err
		}
		return d, event(notify.TriggerProposes, "proposes", fmt.Sprintf("Trigger %s proposes turning %s off: a person confirms", r.Name, r.SwitchTarget()))
	case ActWithdraw:
		return d, audited(audit.TriggerTransition)
	case ActLock, ActHandOff, ActOverridden:
		if err := audited(audit.TriggerLock); err != nil {
			return d, err
		}
		spec := finding.Spec{Kind: finding.TriggerLocked, Target: r.Target(), App: r.App, Severity: finding.Warning,
			Summary: fmt.Sprintf("Trigger %s locked itself after flapping; %s stays %s until a person resumes the rule", r.Name, r.SwitchTarget(), onOff(next.On)), Detail: d.Why}
		title := fmt.Sprintf("Trigger %s locked itself (flapping)", r.Name)
		switch d.Action {
		case ActHandOff:
			spec.Kind, spec.Severity = finding.TriggerHandoff, finding.Critical
			spec.Summary = fmt.Sprintf("Trigger %s held %s on for max_on %s and handed it to a person: turn it off or resume the rule", r.Name, r.SwitchTarget(), r.MaxOn)
			title = fmt.Sprintf("Trigger %s handed %s to a person (max_on %s)", r.Name, r.SwitchTarget(), r.MaxOn)
		case ActOverridden:
			spec.Kind = finding.TriggerOverridden
			spec.Summary = fmt.Sprintf("Trigger %s and another automation disagree about %s, which is %s now: decide, then resume the rule to hand the switch back to it", r.Name, r.SwitchTarget(), onOff(next.On))
			title = fmt.Sprintf("Trigger %s was overridden on %s", r.Name, r.SwitchTarget())
		}
		if _, err := finding.Open(j.DB(), spec, now); err != nil {
			return d, err
		}
		return d, event(notify.TriggerLocked, "locked", title)
	}
	return d, nil
}

// startPlan starts the rule's staged rollout of its switch instead of
// turning it on at once.
func (s *Service) startPlan(j *server.JobTx, a server.Actor, r *Rule, reason string, d *Decision) error {
	if s.plans == nil {
		return fmt.Errorf("trigger %s: its rollout is template %q, and staged rollouts are not available on this console", r.Target(), r.RolloutTemplate)
	}
	id, err := s.plans.StartTemplate(j, a, r.App, r.SwitchName, r.RolloutTemplate, reason)
	if err != nil {
		return fmt.Errorf("trigger %s: start staged rollout %q: %w", r.Target(), r.RolloutTemplate, err)
	}
	d.Why += fmt.Sprintf("; staged rollout #%d (%s) started", id, r.RolloutTemplate)
	return nil
}

// endPlan ends the switch's active staged rollout, if any, before the
// rule turns the switch off.
func (s *Service) endPlan(j *server.JobTx, a server.Actor, r *Rule, reason string, d *Decision) error {
	if s.plans == nil {
		return nil
	}
	ended, err := s.plans.EndPlan(j, a, r.App, r.SwitchName, reason)
	if err != nil {
		return fmt.Errorf("trigger %s: end the staged rollout: %w", r.Target(), err)
	}
	if ended {
		d.Why += "; its staged rollout ended"
	}
	return nil
}
