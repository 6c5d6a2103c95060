package drill

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Phases of a run. pending: waiting for its preflight; applying: its lease
// granted, the override being written; active: the override is in etcd;
// recovering: the override is gone and the fleet converges back; done.
const (
	PhasePending    = "pending"
	PhaseApplying   = "applying"
	PhaseActive     = "active"
	PhaseRecovering = "recovering"
	PhaseDone       = "done"
)

// Outcomes of a finished run.
const (
	OutcomePassed       = "passed"
	OutcomeFailed       = "failed"
	OutcomeInconclusive = "inconclusive"
	OutcomeAborted      = "aborted"
	OutcomeInterrupted  = "interrupted"
	OutcomeRefused      = "refused"
	OutcomeMissed       = "missed"
)

// Verdict results.
const (
	Pass         = "pass"
	Fail         = "fail"
	Inconclusive = "inconclusive"
	Skipped      = "skipped" // the run ended before this check
)

// Progress is a run's durable state and evidence (drill_runs.state): what
// the job saw at each phase, so a new leader can finish or end the run and
// the report shows why each verdict is what it is.
type Progress struct {
	Preflight []Check `json:"preflight,omitempty"`
	// HeldRules are the auto-trigger rules (app/name) that held their
	// evaluation while the run degraded their app's fleet signals.
	HeldRules     []string `json:"held_rules,omitempty"`
	SwitchVersion int64    `json:"switch_version,omitempty"`
	// Baseline are the probe rounds against the undegraded path.
	Baseline []ProbeRound `json:"baseline_probes,omitempty"`

	LeaseTTLSeconds  int64      `json:"lease_ttl_seconds,omitempty"`
	OverrideRevision int64      `json:"override_revision,omitempty"`
	AppliedAt        *time.Time `json:"applied_at,omitempty"`
	// Instances are the app's instances as the run saw them, by id.
	Instances    map[string]*InstanceEvidence `json:"instances,omitempty"`
	EffectDoneAt *time.Time                   `json:"effect_checked_at,omitempty"`
	// Degraded are the probe rounds while the override was on.
	Degraded []ProbeRound `json:"degraded_probes,omitempty"`
	// FleetP99MS is the SDK-reported p99 of degraded requests served by
	// its middleware, the highest seen while the override was on.
	FleetP99MS *float64          `json:"fleet_degraded_p99_ms,omitempty"`
	Conditions []ConditionSample `json:"conditions,omitempty"`
	// LoadBefore and LoadDegraded are the capacity check's measurements:
	// the baseline window and the latest of the degraded window.
	LoadBefore   *LoadSample `json:"load_before,omitempty"`
	LoadDegraded *LoadSample `json:"load_degraded,omitempty"`

	AbortReason      string `json:"abort_reason,omitempty"`
	AbortByCondition bool   `json:"abort_by_condition,omitempty"`

	RevertRevision int64        `json:"revert_revision,omitempty"`
	RevertedAt     *time.Time   `json:"reverted_at,omitempty"`
	RevertReason   string       `json:"revert_reason,omitempty"`
	After          []ProbeRound `json:"after_probes,omitempty"`

	Verdicts *Verdicts `json:"verdicts,omitempty"`
	Timeline []Note    `json:"timeline,omitempty"`
}

// Check is one preflight check.
type Check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail,omitempty"`
}

// Note is one line of a run's timeline.
type Note struct {
	At   time.Time `json:"at"`
	What string    `json:"what"`
}

// ConditionSample is one evaluation of an abort condition. Value is
// formatted, because a Prometheus answer may be ±Inf, which JSON has not.
type ConditionSample struct {
	Query    string    `json:"query"`
	At       time.Time `json:"at"`
	Value    string    `json:"value,omitempty"`
	NoData   bool      `json:"no_data,omitempty"`
	Error    string    `json:"error,omitempty"`
	Breached bool      `json:"breached"`
}

// LoadSample is one measurement of a capacity check's load: a finite
// value, no data, or an error.
type LoadSample struct {
	At     time.Time `json:"at"`
	Value  *float64  `json:"value,omitempty"`
	NoData bool      `json:"no_data,omitempty"`
	Error  string    `json:"error,omitempty"`
}

// String is the value for people, or why there is none.
func (s *LoadSample) String() string {
	switch {
	case s == nil:
		return "not measured"
	case s.Error != "":
		return "error: " + s.Error
	case s.Value == nil:
		return "no data"
	}
	return strconv.FormatFloat(*s.Value, 'g', 6, 64)
}

// InstanceEvidence is what the run saw of one instance. Times are
// milliseconds after the override was written (…AfterMS) or removed
// (Back…, Stopped…), as the console saw the fleet's reports.
type InstanceEvidence struct {
	Targeted bool `json:"targeted"`
	// Signals is false for an SDK that reports no counters.
	Signals bool `json:"signals"`
	// Before is the degraded counter before the run; Degraded the latest.
	Before         uint64 `json:"degraded_before"`
	Degraded       uint64 `json:"degraded"`
	AppliedAfterMS *int64 `json:"applied_after_ms,omitempty"`
	RoseAfterMS    *int64 `json:"rose_after_ms,omitempty"`
	// AtRevert is the degraded counter when the override was removed.
	AtRevert       uint64 `json:"degraded_at_revert"`
	BackAfterMS    *int64 `json:"back_after_ms,omitempty"`
	StoppedAfterMS *int64 `json:"stopped_after_ms,omitempty"`
	// Gone: the instance left the fleet during the run.
	Gone bool `json:"gone,omitempty"`

	// BackCounter and BackReport are the counter and the time (unix s) of
	// the newest report after the instance applied the revert.
	BackCounter uint64 `json:"back_counter,omitempty"`
	BackReport  int64  `json:"back_report,omitempty"`
	// FlatSinceMS is when (ms after the revert) the console last saw the
	// counter change after the revert.
	FlatSinceMS int64 `json:"flat_since_ms,omitempty"`
}

// Verdicts are the four checks of a run, and a fifth when the drill has
// a capacity check.
type Verdicts struct {
	TakesEffect     Verdict  `json:"takes_effect"`
	FallbackCorrect Verdict  `json:"fallback_correct"`
	Fast            Verdict  `json:"fast"`
	Recovers        Verdict  `json:"recovers"`
	FreesCapacity   *Verdict `json:"frees_capacity,omitempty"`
}

// verdictNames name the verdicts of all() for people, in its order.
var verdictNames = []string{"takes effect", "fallback correct", "fast", "recovers", "frees capacity"}

// firstFailingBody opens the verdict detail that holds an answer's excerpt.
const firstFailingBody = "first failing body: "

// Verdict is one check: its result, one line why, and its evidence.
type Verdict struct {
	Result  string   `json:"result"`
	Summary string   `json:"summary"`
	Details []string `json:"details,omitempty"`
}

func (v *Verdicts) all() []*Verdict {
	all := []*Verdict{&v.TakesEffect, &v.FallbackCorrect, &v.Fast, &v.Recovers}
	if v.FreesCapacity != nil {
		all = append(all, v.FreesCapacity)
	}
	return all
}

// seen is one live instance of the app as the fleet model shows it at a
// step.
type seen struct {
	ID              string
	Targeted        bool // in the override's slice
	Applied         bool // applied the override's revision
	AppliedRevision int64
	Degraded        uint64
	LastReport      int64
	Signals         bool
	// Interval is the instance's report interval (0: unknown).
	Interval time.Duration
}

// quietFor is how long a counter must stay unchanged in the fleet model,
// after the instance applied the revert, to count as stopped without a
// newer report: an SDK reports a moved counter within its interval plus
// 20 % jitter, so silence longer than that means no degraded answer. It
// covers an SDK whose ack of the revert carried nothing new and so writes
// no further report.
func quietFor(interval time.Duration) time.Duration { return interval*3/2 + time.Second }

func msSince(from *time.Time, now time.Time) *int64 {
	d := now.Sub(*from).Milliseconds()
	return &d
}

// note adds a line to the timeline.
func (p *Progress) note(now time.Time, format string, a ...any) {
	p.Timeline = append(p.Timeline, Note{At: now.UTC(), What: fmt.Sprintf(format, a...)})
}

// recordBaseline keeps each live instance's degraded counter before the run.
func (p *Progress) recordBaseline(fleet []seen) {
	p.Instances = map[string]*InstanceEvidence{}
	for _, s := range fleet {
		p.Instances[s.ID] = &InstanceEvidence{Before: s.Degraded, Degraded: s.Degraded, Signals: s.Signals}
	}
}

// observeEffect records, while the override is on, which instances are in
// its slice, when each applied it and when its degraded counter rose.
func (p *Progress) observeEffect(fleet []seen, now time.Time) {
	if p.Instances == nil {
		p.Instances = map[string]*InstanceEvidence{}
	}
	for _, s := range fleet {
		ev := p.Instances[s.ID]
		if ev == nil { // started during the run: it counted from zero
			ev = &InstanceEvidence{}
			p.Instances[s.ID] = ev
		}
		ev.Targeted = ev.Targeted || s.Targeted
		ev.Signals, ev.Degraded, ev.AtRevert = s.Signals, s.Degraded, s.Degraded
		if s.Applied && ev.AppliedAfterMS == nil {
			ev.AppliedAfterMS = msSince(p.AppliedAt, now)
		}
		if s.Applied && s.Degraded > ev.Before && ev.RoseAfterMS == nil {
			ev.RoseAfterMS = msSince(p.AppliedAt, now)
		}
	}
}

// observeRecovery records, after the revert, when each instance of the
// slice applied it and when its degraded counter stopped: a report after it
// applied the revert shows no rise since the revert, or two such reports
// show the same count.
func (p *Progress) observeRecovery(fleet []seen, now time.Time) {
	live := map[string]seen{}
	for _, s := range fleet {
		live[s.ID] = s
	}
	for id, ev := range p.Instances {
		if !ev.Targeted || ev.StoppedAfterMS != nil {
			continue
		}
		s, ok := live[id]
		ev.Gone = !ok
		if !ok || s.AppliedRevision < p.RevertRevision {
			continue
		}
		ev.Degraded = s.Degraded
		since := msSince(p.RevertedAt, now)
		if ev.BackAfterMS == nil {
			ev.BackAfterMS = since
			ev.BackCounter, ev.BackReport, ev.FlatSinceMS = s.Degraded, s.LastReport, *since
			if s.Degraded == ev.AtRevert {
				ev.StoppedAfterMS = ev.BackAfterMS
			}
			continue
		}
		switch {
		case s.Degraded != ev.BackCounter:
			ev.BackCounter, ev.BackReport, ev.FlatSinceMS = s.Degraded, s.LastReport, *since
		case s.LastReport > ev.BackReport,
			s.Interval > 0 && time.Duration(*since-ev.FlatSinceMS)*time.Millisecond >= quietFor(s.Interval):
			ev.StoppedAfterMS = since
		}
	}
}

// targeted returns the ids of the instances in the slice, sorted.
func (p *Progress) targeted() []string {
	var ids []string
	for id, ev := range p.Instances {
		if ev.Targeted {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

func (p *Progress) allRose() bool {
	ids := p.targeted()
	for _, id := range ids {
		if p.Instances[id].RoseAfterMS == nil {
			return false
		}
	}
	return len(ids) > 0
}

func (p *Progress) allRecovered() bool {
	for _, id := range p.targeted() {
		if ev := p.Instances[id]; ev.StoppedAfterMS == nil && !ev.Gone {
			return false
		}
	}
	return true
}

// action is what a run's next step must do.
type action int

const (
	actWait   action = iota // observe and wait
	actStart                // pending: preflight, baseline probes, apply
	actProbe                // active: the degraded probe round
	actRevert               // active: remove the override
	actFinish               // recovering: the after-probes, the verdicts, close
)

func (a action) String() string {
	return [...]string{"wait", "start", "probe", "revert", "finish"}[a]
}

// decide is a run's state machine: from its phase, its evidence and now, the
// next thing to do. A run reverts when it is aborted or its duration is
// over, whatever it is doing (degraded probes under way are cut short);
// until then, once the slice took the override or effect_within passed,
// it probes the degraded path. It finishes once the slice recovered or
// recover_within passed.
func decide(phase string, p *Progress, pl *plan, now time.Time) action {
	switch phase {
	case PhasePending:
		return actStart
	case PhaseActive:
		switch {
		case p.AbortReason != "" || !now.Before(p.AppliedAt.Add(pl.duration)):
			return actRevert
		case p.EffectDoneAt == nil:
			if p.allRose() || !now.Before(p.AppliedAt.Add(pl.effectWithin)) {
				return actProbe
			}
		}
	case PhaseRecovering:
		if p.allRecovered() || !now.Before(p.RevertedAt.Add(pl.recoverWithin)) {
			return actFinish
		}
	}
	return actWait
}

// judge computes the verdicts from the evidence.
func judge(p *Progress, pl *plan) Verdicts {
	v := Verdicts{
		TakesEffect:     judgeEffect(p, pl),
		FallbackCorrect: judgeFallback(p),
		Fast:            judgeFast(p, pl),
		Recovers:        judgeRecovery(p),
	}
	if pl.capacity != nil {
		c := judgeCapacity(p, pl.capacity)
		v.FreesCapacity = &c
	}
	return v
}

// judgeCapacity compares the load of the degraded window with the
// baseline's: it passes when it fell by at least the minimum drop, fails
// with both values when it did not, and is inconclusive without a value
// on either side or with no load to free before the run.
func judgeCapacity(p *Progress, c *Capacity) Verdict {
	before, during := p.LoadBefore, p.LoadDegraded
	details := []string{
		fmt.Sprintf("%s (%s): before %s, degraded %s", c.Query, c.Source, before, during),
	}
	switch {
	case p.AppliedAt == nil:
		return Verdict{Result: Skipped, Summary: "the override was never applied", Details: details}
	case during == nil:
		return Verdict{Result: Skipped, Summary: "the load was not measured while the override was on (the run ended before the slice took it)", Details: details}
	case before == nil || before.Value == nil || during.Value == nil:
		return Verdict{Result: Inconclusive, Summary: fmt.Sprintf("no value to compare: before %s, degraded %s", before, during), Details: details}
	case *before.Value <= 0:
		return Verdict{Result: Inconclusive, Summary: fmt.Sprintf("no load before the run (%s) to free", before), Details: details}
	}
	drop := 1 - *during.Value / *before.Value
	summary := fmt.Sprintf("load %s → %s: %s by %.0f %% (at least %.0f %% required)", before, during, fallOrRise(drop), math.Abs(drop)*100, c.MinDrop*100)
	if drop < c.MinDrop {
		return Verdict{Result: Fail, Summary: summary + "; the degraded path still costs what it should spare", Details: details}
	}
	return Verdict{Result: Pass, Summary: summary, Details: details}
}

func fallOrRise(drop float64) string {
	if drop < 0 {
		return "rose"
	}
	return "fell"
}

func judgeEffect(p *Progress, pl *plan) Verdict {
	if p.AppliedAt == nil {
		return Verdict{Result: Skipped, Summary: "the override was never applied"}
	}
	ids := p.targeted()
	if len(ids) == 0 {
		return Verdict{Result: Inconclusive, Summary: "no live instance was in the drill's slice"}
	}
	within := pl.effectWithin.Milliseconds()
	var bad, quiet []string
	var details []string
	for _, id := range ids {
		ev := p.Instances[id]
		line := fmt.Sprintf("%s: degraded %d → %d", id, ev.Before, ev.Degraded)
		switch {
		case !ev.Signals:
			quiet = append(quiet, id)
			line += ", reports no signals (an older SDK)"
		case ev.AppliedAfterMS == nil:
			bad = append(bad, id)
			line += ", did not apply the override"
		case ev.RoseAfterMS == nil:
			bad = append(bad, id)
			line += fmt.Sprintf(", applied after %d ms, but its degraded counter did not rise (not watching the switch, or caching its value?)", *ev.AppliedAfterMS)
		case *ev.RoseAfterMS > within:
			bad = append(bad, id)
			line += fmt.Sprintf(", rose only after %d ms (> %s)", *ev.RoseAfterMS, pl.effectWithin)
		default:
			line += fmt.Sprintf(", applied after %d ms, rose after %d ms", *ev.AppliedAfterMS, *ev.RoseAfterMS)
		}
		details = append(details, line)
	}
	switch {
	case len(bad) > 0:
		return Verdict{Result: Fail, Summary: fmt.Sprintf("%d of %d instances in the slice did not take it within %s: %s", len(bad), len(ids), pl.effectWithin, strings.Join(bad, ", ")), Details: details}
	case len(quiet) == len(ids):
		return Verdict{Result: Inconclusive, Summary: "no instance in the slice reports signals", Details: details}
	}
	return Verdict{Result: Pass, Summary: fmt.Sprintf("%d/%d instances applied it and counted degraded answers within %s", len(ids)-len(quiet), len(ids), pl.effectWithin), Details: details}
}

func judgeFallback(p *Progress) Verdict {
	if len(p.Degraded) == 0 {
		return Verdict{Result: Skipped, Summary: "no probe ran while the override was on"}
	}
	var details, bad []string
	for _, r := range p.Degraded {
		details = append(details, r.describe())
		if r.Failures > 0 {
			bad = append(bad, r.describe())
			if f := r.FirstFailure; f != nil && f.Body != "" {
				details = append(details, firstFailingBody+f.Body)
			}
		}
	}
	if len(bad) > 0 {
		return Verdict{Result: Fail, Summary: strings.Join(bad, "; "), Details: details}
	}
	return Verdict{Result: Pass, Summary: "every degraded answer had the expected status and every required field", Details: details}
}

func judgeFast(p *Progress, pl *plan) Verdict {
	if len(p.Degraded) == 0 {
		return Verdict{Result: Skipped, Summary: "no probe ran while the override was on"}
	}
	var details, bad []string
	strictest := time.Duration(math.MaxInt64)
	for i, r := range p.Degraded {
		limit := pl.probes[i].maxP99
		strictest = min(strictest, limit)
		line := fmt.Sprintf("%s %s: p99 %.1f ms (limit %s)", r.Method, r.URL, r.P99MS, limit)
		details = append(details, line)
		if r.P99MS > ms(limit) {
			bad = append(bad, line)
		}
	}
	if p.FleetP99MS != nil {
		line := fmt.Sprintf("SDK middleware, degraded requests: p99 ≤ %.0f ms (limit %s)", *p.FleetP99MS, strictest)
		details = append(details, line)
		if *p.FleetP99MS > ms(strictest) {
			bad = append(bad, line)
		}
	} else {
		details = append(details, "SDK middleware: no degraded request timed (the path is not behind the middleware)")
	}
	if len(bad) > 0 {
		return Verdict{Result: Fail, Summary: strings.Join(bad, "; "), Details: details}
	}
	return Verdict{Result: Pass, Summary: "the degraded path answered within its p99 limit", Details: details}
}

func judgeRecovery(p *Progress) Verdict {
	if p.RevertedAt == nil {
		return Verdict{Result: Skipped, Summary: "the override was never removed by the run"}
	}
	var details, bad []string
	for _, id := range p.targeted() {
		ev := p.Instances[id]
		switch {
		case ev.Gone:
			bad = append(bad, id)
			details = append(details, id+": left the fleet during the drill")
		case ev.BackAfterMS == nil:
			bad = append(bad, id)
			details = append(details, id+": did not report the revert")
		case ev.StoppedAfterMS == nil:
			bad = append(bad, id)
			details = append(details, fmt.Sprintf("%s: back after %d ms, but no later report showed its degraded counter flat (at %d, %d at the revert)", id, *ev.BackAfterMS, ev.Degraded, ev.AtRevert))
		default:
			details = append(details, fmt.Sprintf("%s: back after %d ms, counter stopped at %d", id, *ev.BackAfterMS, ev.Degraded))
		}
	}
	probesOK := len(p.After) > 0
	for _, r := range p.After {
		details = append(details, "after: "+r.describe())
		if r.Failures > 0 {
			probesOK = false
		}
	}
	switch {
	case len(bad) > 0:
		return Verdict{Result: Fail, Summary: "not back to normal: " + strings.Join(bad, ", "), Details: details}
	case !probesOK:
		return Verdict{Result: Fail, Summary: "the probes do not answer as before the run", Details: details}
	}
	return Verdict{Result: Pass, Summary: "every instance reports it off, degraded counters stopped, probes answer as before", Details: details}
}

// outcome is a finished run's outcome from its verdicts.
func outcome(p *Progress, v Verdicts) string {
	if p.AbortReason != "" {
		return OutcomeAborted
	}
	out := OutcomePassed
	for _, x := range v.all() {
		switch x.Result {
		case Fail:
			return OutcomeFailed
		case Inconclusive, Skipped:
			out = OutcomeInconclusive
		}
	}
	return out
}
