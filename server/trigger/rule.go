package trigger

import (
	"math"
	"strings"
	"time"

	"github.com/switchyard-io/switchyard/sdk/wire"
	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/signal"
)

// Modes.
const (
	// ModeEnforce changes the switch.
	ModeEnforce = "enforce"
	// ModeDryRun evaluates and records what the rule would do; it changes
	// nothing.
	ModeDryRun = "dry_run"
)

// Defaults of the optional fields.
const (
	DefaultCooldown    = time.Minute
	DefaultFlapMax     = 4
	DefaultFlapWindow  = time.Hour
	DefaultOnNoData    = MissingHold
	DefaultOnError     = MissingHold
	maxDuration        = 30 * 24 * time.Hour
	maxFlapTransitions = 1000
	maxDescriptionLen  = 2000
	basisPerPercent    = 100 // a rollout basis is percent × 100
)

// Rule is an auto-trigger rule as stored. Durations are Go duration
// strings.
type Rule struct {
	server.Record
	App                string
	Name               string
	SwitchName         string
	Description        string
	Source             string
	Query              string
	TriggerOp          Op
	TriggerThreshold   float64
	TriggerFor         string
	RecoverOp          Op
	RecoverThreshold   float64
	RecoverFor         string
	Cooldown           string
	MaxOn              string
	OnNoData           string `gorm:"column:missing_data"`
	OnError            string
	ConfirmRecovery    bool
	FlapMaxTransitions int
	FlapWindow         string
	RolloutBasis       *int   // percent × 100; nil: the switch's own rollout
	RolloutTemplate    string // a staged-rollout template the rule starts instead of turning the switch on at once
	Mode               string
}

// TableName pins the table name.
func (Rule) TableName() string { return "triggers" }

// Target is how the audit log names the rule.
func (r *Rule) Target() string { return "trigger/" + r.App + "/" + r.Name }

// Cause is the cause its changes of the switch carry.
func (r *Rule) Cause() string { return r.Target() }

// SwitchTarget is the audit target of the rule's switch.
func (r *Rule) SwitchTarget() string { return "switch/" + r.App + "/" + r.SwitchName }

// Policy is what the evaluator needs of the rule, evaluated every interval.
func (r *Rule) Policy(interval time.Duration) Policy {
	return Policy{
		Trigger:  Condition{Op: r.TriggerOp, Threshold: r.TriggerThreshold, For: dur(r.TriggerFor)},
		Recover:  Condition{Op: r.RecoverOp, Threshold: r.RecoverThreshold, For: dur(r.RecoverFor)},
		Cooldown: dur(r.Cooldown), MaxOn: dur(r.MaxOn), OnNoData: r.OnNoData, OnError: r.OnError,
		ConfirmRecovery: r.ConfirmRecovery, FlapMax: r.FlapMaxTransitions, FlapWindow: dur(r.FlapWindow),
		Interval: interval,
	}
}

// Rollout is the rollout the rule turns the switch on with (nil: the
// switch's own), keeping the switch's stickiness and selector.
func (r *Rule) rollout(sw *server.Switch) *wire.Rollout {
	if r.RolloutBasis == nil {
		return nil
	}
	ro := sw.Rollout()
	ro.Percent = float64(*r.RolloutBasis) / basisPerPercent
	return &ro
}

func dur(s string) time.Duration {
	d, _ := server.ParseDuration(s)
	return d
}

// Input is a rule as the API takes it: the body of a create, and what a
// patch is merged over. Durations are Go duration strings.
type Input struct {
	Name            string        `json:"name"`
	Switch          string        `json:"switch"`
	Description     string        `json:"description"`
	Source          string        `json:"source"`
	Query           string        `json:"query"`
	Trigger         CondInput     `json:"trigger"`
	Recover         CondInput     `json:"recover"`
	Cooldown        string        `json:"cooldown"`
	MaxOn           string        `json:"max_on"`
	OnNoData        string        `json:"on_no_data"`
	OnError         string        `json:"on_error"`
	ConfirmRecovery bool          `json:"confirm_recovery"`
	Flap            *FlapInput    `json:"flap"`
	Rollout         *RolloutInput `json:"rollout"`
	Mode            string        `json:"mode"`
	Reason          string        `json:"reason"`
}

// CondInput is one side of a rule: op, threshold, for.
type CondInput struct {
	Op        Op       `json:"op"`
	Threshold *float64 `json:"threshold"`
	For       string   `json:"for"`
}

// FlapInput is the flap detection as the API takes it: more than
// MaxTransitions flips within Window lock the rule. An absent member takes
// its default; an explicit one must be in range.
type FlapInput struct {
	MaxTransitions *int   `json:"max_transitions"`
	Window         string `json:"window"`
}

// FlapView is a rule's flap detection.
type FlapView struct {
	MaxTransitions int    `json:"max_transitions"`
	Window         string `json:"window"`
}

// RolloutInput is the rollout the rule turns the switch on with.
type RolloutInput struct {
	Percent float64 `json:"percent,omitempty"`
	// Template is a staged-rollout template (rollout.TemplateDefault,
	// rollout.TemplateCanaries): when the rule fires it starts that plan
	// instead of turning the switch on for everyone at once, and when it
	// recovers it ends the plan and turns the switch off.
	Template string `json:"template,omitempty"`
}

// Patch changes some fields of a rule: an RFC 7396 merge patch over the
// rule's Input (server.Patch). name and switch cannot change.
type Patch = server.Patch

// Input returns the rule as a create body would write it.
func (r *Rule) Input() Input {
	v := r.config()
	return v.Input()
}

// checks are the validations a rule needs from outside itself: its source
// and query against the metric sources, its rollout template against the
// staged rollouts.
type checks struct {
	query    func(source, query string) *server.FieldError
	template func(name string) *server.FieldError
}

// build validates in for app and returns the rule it describes, with the
// defaults filled in. Every bad field is reported; check validates the
// query against its source (a field error naming source or query). The
// switch's existence is checked by the caller, inside its transaction.
func build(app string, in Input, check checks) (*Rule, error) {
	var v server.FieldErrors
	r := &Rule{
		App: app, Name: strings.TrimSpace(in.Name), SwitchName: strings.TrimSpace(in.Switch),
		Description: strings.TrimSpace(in.Description), Source: strings.TrimSpace(in.Source), Query: strings.TrimSpace(in.Query),
		OnNoData: in.OnNoData, OnError: in.OnError, ConfirmRecovery: in.ConfirmRecovery, Mode: in.Mode,
	}
	if !wire.ValidName(r.Name) {
		v.Addf("name", "must match %s", wire.NamePattern)
	}
	if !wire.ValidName(r.SwitchName) {
		v.Addf("switch", "must name a switch of app %s (%s)", app, wire.NamePattern)
	}
	if len(r.Description) > maxDescriptionLen || !wire.Printable(r.Description) {
		v.Addf("description", "must be at most %d characters without control characters", maxDescriptionLen)
	}
	switch r.Source {
	case signal.SourceFleet, signal.SourcePrometheus:
		if fe := check.query(r.Source, r.Query); fe != nil {
			v = append(v, fe)
		}
	case "":
		v.Addf("source", "is required: %q or %q", signal.SourceFleet, signal.SourcePrometheus)
	default:
		v.Addf("source", "must be %q or %q", signal.SourceFleet, signal.SourcePrometheus)
	}

	trig, rec := in.Trigger, in.Recover
	if !trig.Op.Ordered() {
		v.Addf("trigger.op", "must be one of %s", opList())
	}
	if rec.Op == "" && trig.Op.Ordered() {
		rec.Op = opposite(trig.Op)
	}
	// An absent recover.op follows trigger.op: when that is wrong, only
	// trigger.op is to fix.
	if rec.Op != "" && !rec.Op.Ordered() {
		v.Addf("recover.op", "must be one of %s", opList())
	}
	threshold(&v, "trigger.threshold", trig.Threshold)
	threshold(&v, "recover.threshold", rec.Threshold)
	if trig.Op.Ordered() && rec.Op.Ordered() {
		switch {
		case trig.Op.Upward() == rec.Op.Upward():
			v.Addf("recover.op", "must point the other way from trigger.op %s: %s or %s", trig.Op, opposite(trig.Op), oppositeInclusive(trig.Op))
		case trig.Threshold != nil && rec.Threshold != nil && finite(*trig.Threshold) && finite(*rec.Threshold):
			t, x := *trig.Threshold, *rec.Threshold
			if trig.Op.Upward() && x >= t {
				v.Addf("recover.threshold", "must be below the trigger threshold %s (the safe side), got %s", formatNum(t), formatNum(x))
			}
			if !trig.Op.Upward() && x <= t {
				v.Addf("recover.threshold", "must be above the trigger threshold %s (the safe side), got %s", formatNum(t), formatNum(x))
			}
		}
	}
	r.TriggerOp, r.RecoverOp = trig.Op, rec.Op
	if trig.Threshold != nil {
		r.TriggerThreshold = *trig.Threshold
	}
	if rec.Threshold != nil {
		r.RecoverThreshold = *rec.Threshold
	}
	r.TriggerFor = duration(&v, "trigger.for", trig.For, 0)
	r.RecoverFor = duration(&v, "recover.for", rec.For, 0)
	r.Cooldown = duration(&v, "cooldown", in.Cooldown, DefaultCooldown)
	r.MaxOn = duration(&v, "max_on", in.MaxOn, 0)

	r.OnNoData = treatment(&v, "on_no_data", r.OnNoData)
	r.OnError = treatment(&v, "on_error", r.OnError)
	flap := FlapView{MaxTransitions: DefaultFlapMax, Window: server.ShortDuration(DefaultFlapWindow)}
	if in.Flap != nil {
		flap.Window = in.Flap.Window
		if in.Flap.MaxTransitions != nil {
			flap.MaxTransitions = *in.Flap.MaxTransitions
		}
	}
	if flap.MaxTransitions < 1 || flap.MaxTransitions > maxFlapTransitions {
		v.Addf("flap.max_transitions", "must be between 1 and %d", maxFlapTransitions)
	}
	r.FlapMaxTransitions = flap.MaxTransitions
	if r.FlapWindow = duration(&v, "flap.window", flap.Window, DefaultFlapWindow); dur(r.FlapWindow) <= 0 && flap.Window != "" {
		v.Addf("flap.window", "must be positive")
	}
	switch ro := in.Rollout; {
	case ro == nil:
	case ro.Template != "" && ro.Percent != 0:
		v.Addf("rollout", "give a percent or a template, not both")
	case ro.Template != "":
		r.RolloutTemplate = strings.TrimSpace(ro.Template)
		if fe := check.template(r.RolloutTemplate); fe != nil {
			v = append(v, fe)
		}
	default:
		w := wire.Rollout{Percent: ro.Percent}
		if err := w.Validate(); err != nil || w.Basis() == 0 {
			v.Addf("rollout.percent", "must be more than 0 and at most 100, with at most two decimals")
		}
		b := w.Basis()
		r.RolloutBasis = &b
	}
	switch r.Mode {
	case "":
		r.Mode = ModeEnforce
	case ModeEnforce, ModeDryRun:
	default:
		v.Addf("mode", "must be %q or %q", ModeEnforce, ModeDryRun)
	}
	return r, v.Err()
}

func threshold(v *server.FieldErrors, field string, t *float64) {
	switch {
	case t == nil:
		v.Addf(field, "is required")
	case !finite(*t):
		v.Addf(field, "must be a finite number")
	}
}

func finite(f float64) bool { return !math.IsInf(f, 0) && !math.IsNaN(f) }

// duration parses an optional duration field (empty: def) and returns it
// in canonical form.
func duration(v *server.FieldErrors, field, s string, def time.Duration) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return server.ShortDuration(def)
	}
	d, err := server.ParseDuration(s)
	switch {
	case err != nil:
		v.Addf(field, `must be a duration such as "30s", "5m" or "1d", got %q`, s)
	case d < 0:
		v.Addf(field, "must not be negative, got %s", s)
	case d > maxDuration:
		v.Addf(field, "must be at most %s", server.ShortDuration(maxDuration))
	}
	return server.ShortDuration(d)
}

func opList() string {
	names := make([]string, len(Ops))
	for i, o := range Ops {
		names[i] = string(o)
	}
	return strings.Join(names, " ")
}

func oppositeInclusive(o Op) Op {
	if o.Upward() {
		return AtMost
	}
	return AtLeast
}

// treatment validates what a sample without a value counts as; "" is the
// default, hold.
func treatment(v *server.FieldErrors, field, t string) string {
	if t == "" {
		return MissingHold
	}
	if err := signal.CheckTreatment(t); err != nil {
		v.Add(field, err.Error())
	}
	return t
}
