package drill

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/internal/oneline"
	"github.com/switchyard-io/switchyard/sdk/wire"
	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/finding"
	"github.com/switchyard-io/switchyard/server/notify"
	"github.com/switchyard-io/switchyard/server/signal"
)

// A run in progress, step by step: advance observes the fleet, the probe
// rounds and the abort conditions, decides the next phase, and records it
// (save); a finished run is closed with its outcome, audited, and told to
// its finding and the notification channels (close, tell). The override
// itself — written, kept alive and taken back under its lease — is in
// lease.go; the schedules that start runs are in schedule.go.

func closeAt(r *Run, outcome string, now time.Time) {
	r.Phase, r.Outcome, r.FinishedAt = PhaseDone, outcome, &now
}

// advance moves one run in progress on.
func (j *Job) advance(ctx context.Context, t server.Term, r *Run, now time.Time) error {
	p := r.progress()
	pl, err := r.plan()
	if err != nil {
		return j.close(ctx, t, r, p, OutcomeRefused, "refused: the drill's settings do not validate: "+err.Error())
	}
	k, held := j.holds(r.ID, t.Rev)
	if (r.Phase == PhaseApplying || r.Phase == PhaseActive) && !held {
		return j.interrupt(ctx, t, r, p)
	}
	if r.AbortRequest != "" && p.AbortReason == "" {
		p.AbortReason = r.AbortRequest
	}
	switch r.Phase {
	case PhasePending:
		if p.AbortReason != "" {
			return j.close(ctx, t, r, p, OutcomeAborted, p.AbortReason+" (before it started)")
		}
	case PhaseApplying:
		return j.resumeApply(ctx, t, r, p, k)
	case PhaseActive:
		j.observeActive(ctx, r, p, pl, k, now)
	case PhaseRecovering:
		p.observeRecovery(j.fleet(r, pl), now)
	}
	switch decide(r.Phase, p, pl, now) {
	case actStart:
		return j.start(ctx, t, r, p, pl)
	case actProbe:
		// Degraded rounds until the duration ends at the latest.
		left := p.AppliedAt.Add(pl.duration).Sub(now)
		rounds, done, err := j.probe(ctx, t.Rev, r, stageDegraded, pl, min(left, pl.roundBudget()))
		if err != nil || !done {
			return errors.Join(err, j.saveProgress(ctx, t, r, p))
		}
		p.Degraded = rounds
		at := j.s.cfg.Service.Now()
		p.EffectDoneAt = &at
		p.note(at, "takes effect checked; degraded probes sent")
		if rate := failureRate(p.Degraded); rate > pl.failureRate {
			p.AbortReason, p.AbortByCondition = fmt.Sprintf("aborted: %.0f %% of the degraded probes failed (limit %.0f %%)", rate*100, pl.failureRate*100), true
		}
		return j.save(ctx, t, r, p, nil)
	case actRevert:
		if p.EffectDoneAt == nil && p.Degraded == nil {
			// Aborted, or the duration ended, with the degraded rounds
			// under way: they stop, and what they showed is kept.
			if rounds := j.cutShort(r.ID, stageDegraded); rounds != nil {
				p.Degraded = rounds
				p.note(j.s.cfg.Service.Now(), "degraded probes cut short by the revert")
			}
		}
		return j.revert(ctx, t, r, p)
	case actFinish:
		rounds, done, err := j.probe(ctx, t.Rev, r, stageAfter, pl, pl.roundBudget())
		if err != nil || !done {
			return errors.Join(err, j.saveProgress(ctx, t, r, p))
		}
		p.After = rounds
		v := judge(p, pl)
		p.Verdicts = &v
		out := outcome(p, v)
		return j.close(ctx, t, r, p, out, runSummary(out, p, v))
	}
	return j.saveProgress(ctx, t, r, p)
}

// saveProgress stores the evidence of a run that stays in its phase, when
// it changed since the step read the run: most steps of an active run
// (every 200 ms) see the same fleet reports and write nothing.
func (j *Job) saveProgress(ctx context.Context, t server.Term, r *Run, p *Progress) error {
	if encode(p) == r.State {
		return nil
	}
	return j.save(ctx, t, r, p, nil)
}

func failureRate(rounds []ProbeRound) float64 {
	var n, bad int
	for _, r := range rounds {
		n, bad = n+r.Requests, bad+r.Failures
	}
	if n == 0 {
		return 0
	}
	return float64(bad) / float64(n)
}

// fleet returns the app's live instances as the run sees them: in the
// drill's slice or not, whether each applied the override, its degraded
// counter for the switch.
func (j *Job) fleet(r *Run, pl *plan) []seen {
	slice := &wire.Switch{App: r.App, Name: r.SwitchName, State: wire.StateOn, Rollout: pl.rollout}
	p := r.progress()
	var out []seen
	for _, in := range j.s.cfg.Fleet.Instances(r.App) {
		s := seen{ID: in.ID, Targeted: slice.Includes(in.ID, in.Labels), AppliedRevision: in.AppliedRevision, Signals: in.Signals, Interval: in.ReportInterval}
		s.Applied = p.OverrideRevision > 0 && in.AppliedRevision >= p.OverrideRevision
		if in.LastReport != nil {
			s.LastReport = in.LastReport.Unix()
		}
		for _, sw := range in.Switches {
			if sw.Name == r.SwitchName {
				s.Degraded = sw.Degraded
			}
		}
		out = append(out, s)
	}
	return out
}

// observeActive records the fleet's take-up and the SDK's degraded-path
// p99, checks the abort conditions (at most once a second), the switch
// itself (changed by a job: its own state must apply) and the lease.
func (j *Job) observeActive(ctx context.Context, r *Run, p *Progress, pl *plan, k *keeper, now time.Time) {
	p.observeEffect(j.fleet(r, pl), now)
	// The degraded window of a capacity check opens once the slice took
	// the override; its latest measurement before the revert counts.
	if pl.capacity != nil && (p.EffectDoneAt != nil || p.allRose()) &&
		(p.LoadDegraded == nil || now.Sub(p.LoadDegraded.At) >= time.Second) {
		p.LoadDegraded = j.measureLoad(ctx, r.App, pl.capacity, now)
	}
	if v := j.s.cfg.Fleet.Switch(r.App, r.SwitchName); v.Override && v.DegradedP99 != nil {
		m := ms(*v.DegradedP99)
		if p.FleetP99MS == nil || m > *p.FleetP99MS {
			p.FleetP99MS = &m
		}
	}
	if p.AbortReason != "" {
		return
	}
	if k.lost.Load() {
		p.AbortReason = "aborted: the override's lease ended (etcd unreachable longer than its TTL?); the fleet reverted by itself"
		return
	}
	if sw, err := j.s.cfg.Service.GetSwitch(ctx, r.App, r.SwitchName); err == nil && sw.Version != p.SwitchVersion {
		p.AbortReason = fmt.Sprintf("aborted: the switch changed during the drill (version %d → %d, by %s): its own state applies", p.SwitchVersion, sw.Version, sw.UpdatedBy)
		return
	} else if errors.Is(err, server.ErrNotFound) {
		p.AbortReason = "aborted: the switch was deleted during the drill"
		return
	}
	if len(p.Conditions) > 0 && now.Sub(p.Conditions[0].At) < time.Second {
		return
	}
	if why := j.conditions(ctx, r.App, pl, p, now); why != "" {
		p.AbortReason, p.AbortByCondition = "aborted: "+why, true
	}
}

// measureLoad measures a capacity check's load at now.
func (j *Job) measureLoad(ctx context.Context, app string, c *Capacity, now time.Time) *LoadSample {
	m := j.s.cfg.Sources.MeasureAll(ctx, []signal.Query{{Source: c.Source, App: app, Query: c.Query}}, now)[0]
	s := &LoadSample{At: now.UTC()}
	switch {
	case m.Outcome == signal.OutcomeError:
		s.Error = m.Err
	case m.Outcome == signal.OutcomeNoData:
		s.NoData = true
	case math.IsNaN(m.Value) || math.IsInf(m.Value, 0):
		s.Error = "not a finite number"
	default:
		v := m.Value
		s.Value = &v
	}
	return s
}

// conditions evaluates the abort conditions at now, keeps the samples in p
// and says which one aborts the run ("" none). No data and errors count as
// the condition's on_no_data and on_error say (an error aborts by
// default: a drill must not go on blind).
func (j *Job) conditions(ctx context.Context, app string, pl *plan, p *Progress, now time.Time) string {
	p.Conditions = p.Conditions[:0]
	qs := make([]signal.Query, len(pl.conditions))
	for i, c := range pl.conditions {
		qs[i] = signal.Query{Source: c.Source, App: app, Query: c.Query}
	}
	var why string
	for i, m := range j.s.cfg.Sources.MeasureAll(ctx, qs, now) {
		c := pl.conditions[i]
		cs := ConditionSample{Query: c.Query, At: now.UTC()}
		switch m.Outcome {
		case signal.OutcomeError:
			cs.Error, cs.Breached = m.Err, treatment(c.OnError, signal.Breaching) == signal.Breaching
		case signal.OutcomeNoData:
			cs.NoData, cs.Breached = true, treatment(c.OnNoData, signal.Hold) == signal.Breaching
		default:
			cs.Value = strconv.FormatFloat(m.Value, 'g', 6, 64)
			cs.Breached = ops[c.Op](m.Value, *c.Threshold)
		}
		if cs.Breached && why == "" {
			switch {
			case cs.Error != "":
				why = fmt.Sprintf("abort condition %q could not be evaluated: %s (on_error: breaching)", c.Query, cs.Error)
			case cs.NoData:
				why = fmt.Sprintf("abort condition %q has no data (on_no_data: breaching)", c.Query)
			default:
				why = fmt.Sprintf("abort condition %s %s %g: the value is %s", c.Query, c.Op, *c.Threshold, cs.Value)
			}
		}
		p.Conditions = append(p.Conditions, cs)
	}
	return why
}

// save stores the run's phase and evidence, and whatever more fn writes, in
// one fenced transaction.
func (j *Job) save(ctx context.Context, t server.Term, r *Run, p *Progress, fn func(tx *server.JobTx) error) error {
	inTerm := j.s.cfg.Service.InTerm
	if fn == nil {
		inTerm = j.s.cfg.Service.InTermLazyAudit // the run's state only: no audit lock
	}
	_, err := inTerm(ctx, t, func(tx *server.JobTx) error {
		res := tx.DB().Model(&Run{}).Where("id = ? AND finished_at IS NULL", r.ID).Updates(map[string]any{
			"phase": r.Phase, "state": encode(p), "started_at": r.StartedAt, "reverted_at": r.RevertedAt,
		})
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return fmt.Errorf("run %s finished meanwhile", r.Cause())
		}
		if fn != nil {
			return fn(tx)
		}
		return nil
	})
	return err
}

// close finishes a run with its outcome: audited when it had started, a
// finding opened for a failure, resolved by a pass, and a notification.
func (j *Job) close(ctx context.Context, t server.Term, r *Run, p *Progress, out, summary string) error {
	now := j.s.cfg.Service.Now()
	summary = oneline.Clean(summary, maxReason)
	p.note(now, "%s", summary)
	r.Phase, r.Outcome, r.Summary, r.FinishedAt = PhaseDone, out, summary, &now
	if held := j.s.cfg.HeldRules; held != nil && r.StartedAt != nil {
		p.HeldRules, _ = held(ctx, r.Cause(), *r.StartedAt) // the report's list; the run closes regardless
	}
	_, err := j.s.cfg.Service.InTerm(ctx, t, func(tx *server.JobTx) error {
		res := tx.DB().Model(&Run{}).Where("id = ? AND finished_at IS NULL", r.ID).Updates(map[string]any{
			"phase": PhaseDone, "outcome": out, "summary": summary, "state": encode(p),
			"started_at": r.StartedAt, "reverted_at": r.RevertedAt, "finished_at": now,
		})
		if res.Error != nil || res.RowsAffected == 0 {
			return res.Error
		}
		if r.StartedAt != nil {
			err := tx.Commit(server.Audited{Actor: server.JobActor(audit.ActorDrill, r.Cause()), Action: audit.DrillFinish, App: r.App,
				Reason: summary, Apply: func(*gorm.DB) (string, any, any, error) { return r.target(), nil, r.View(), nil }})
			if err != nil {
				return err
			}
		}
		return j.tell(tx.DB(), r, p, out, summary, now)
	})
	j.drop(r.ID)
	j.stopProbes(r.ID)
	return err
}

// tell opens or resolves the drill's finding and enqueues the notification
// of a finished run.
func (j *Job) tell(tx *gorm.DB, r *Run, p *Progress, out, summary string, now time.Time) error {
	ev := notify.Event{Key: r.Cause() + "/" + out, App: r.App, Target: r.Cause(), Body: summary, At: now,
		Data: map[string]any{"app": r.App, "drill": r.Drill, "switch": r.SwitchName, "run": r.Number, "outcome": out, "dry_run": r.DryRun}}
	if p.Verdicts != nil {
		ev.Data["verdicts"] = p.Verdicts
	}
	title := fmt.Sprintf("drill %s/%s #%d of %s %s", r.App, r.Drill, r.Number, r.SwitchName, out)
	ev.Title = title
	failed := out == OutcomeFailed || out == OutcomeInconclusive || (out == OutcomeAborted && p.AbortByCondition)
	switch {
	case r.DryRun && out == OutcomePassed:
		return nil
	case out == OutcomePassed:
		ev.Kind = notify.DrillPassed
		if _, err := finding.Resolve(tx, finding.DrillFailed, r.target(), fmt.Sprintf("run #%d passed", r.Number), now); err != nil {
			return err
		}
	case failed && !r.DryRun:
		ev.Kind = notify.DrillFailed
		if _, err := finding.Open(tx, finding.Spec{Kind: finding.DrillFailed, Target: r.target(), App: r.App, Severity: finding.Warning,
			Summary: title + ": " + summary, Detail: "report: /ui/apps/" + r.App + "/drills/" + r.Drill + "/runs/" + strconv.FormatInt(r.Number, 10)}, now); err != nil {
			return err
		}
	case failed:
		ev.Kind = notify.DrillFailed
	case out == OutcomeInterrupted:
		ev.Kind = notify.DrillInterrupted
	default: // refused, missed, aborted by a person: the run's record says it
		return nil
	}
	return notify.Enqueue(tx, ev)
}

// startedBy says who or what asked for the run.
func startedBy(r *Run) string {
	if r.StartedVia == ViaSchedule && r.ScheduledFor != nil {
		return "scheduled for " + stamp(*r.ScheduledFor)
	}
	if r.Reason != "" {
		return fmt.Sprintf("asked by %s: %s", r.StartedBy, r.Reason)
	}
	return "asked by " + r.StartedBy
}

func describeTarget(r wire.Rollout) string {
	var parts []string
	if r.Percent < 100 || r.Selector == "" {
		parts = append(parts, strconv.FormatFloat(r.Percent, 'f', -1, 64)+" %")
	}
	if r.Selector != "" {
		parts = append(parts, r.Selector)
	}
	return strings.Join(parts, " of ")
}

// runSummary is a finished run's one line.
func runSummary(out string, p *Progress, v Verdicts) string {
	parts := []string{out}
	if p.AbortReason != "" {
		parts = append(parts, p.AbortReason)
	}
	for i, x := range v.all() {
		s := verdictNames[i] + " " + x.Result
		if x.Result == Fail {
			s += " (" + x.Summary + ")"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

// failedChecks lists the failed preflight checks ("" none).
func failedChecks(cs []Check) string {
	var out []string
	for _, c := range cs {
		if !c.OK {
			out = append(out, c.Name+": "+c.Detail)
		}
	}
	return strings.Join(out, "; ")
}
