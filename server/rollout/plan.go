package rollout

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/switchyard-io/switchyard/sdk/wire"
	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/signal"
)

// Directions of a plan: widen a switch that is off (or on for fewer) until
// it is on for everyone the last step names, or narrow one that is on
// until it is off.
const (
	DirectionOn  = "on"
	DirectionOff = "off"
)

// What a failed gate does (on_failure).
const (
	// FailRevert puts the switch back exactly as it was before the plan.
	FailRevert = "revert"
	// FailPause stops the plan where it is until a person resumes or
	// aborts it.
	FailPause = "pause"
)

// What a condition without a value counts as: no data under on_no_data,
// a failed query under on_error, in the vocabulary of server/signal that
// triggers and drills share. Neither is health: both default to hold.
const (
	// NoDataPause holds: on no data the plan pauses; on errors it waits,
	// and pauses after ErrorLimit in a row.
	NoDataPause = signal.Hold
	// NoDataFail counts as a failed measurement.
	NoDataFail = signal.Breaching
	// NoDataPass counts as a passing one.
	NoDataPass = signal.NotBreaching
)

// legacyTreatments are the gate's words before the shared vocabulary; a
// plan stored or sent with them still means the same.
var legacyTreatments = map[string]string{"pause": NoDataPause, "fail": NoDataFail, "pass": NoDataPass}

// treatment is t in the shared vocabulary; "" is hold.
func treatment(t string) string {
	if n, ok := legacyTreatments[t]; ok {
		return n
	}
	return cmpOr(t, NoDataPause)
}

// Ops are the condition operators: a measurement passes when value <op>
// threshold.
func Ops() []string { return slices.Clone(ops) }

var ops = []string{"<", "<=", ">", ">=", "==", "!="}

// Bounds of a plan.
const (
	maxSteps        = 20
	maxConditions   = 10
	maxHold         = 7 * 24 * time.Hour
	minInterval     = time.Second
	maxInterval     = time.Hour
	maxFailureLimit = 1000
	// DefaultInterval is how often a gate's conditions are measured
	// during a hold.
	DefaultInterval = 10 * time.Second
)

// Plan is a staged rollout of one switch as it is stored and run: its
// steps, each with a gate, and what a failed gate does. Build one with
// Template or by hand; StartPlan and the API validate it.
type Plan struct {
	Direction string `json:"direction"`
	Steps     []Step `json:"steps"`
	OnFailure string `json:"on_failure"`
	// Reason is why the plan runs; it goes to the audit log.
	Reason string `json:"-"`
}

// Step is one stage: the slice of the fleet it opens the switch to, how
// long it holds once converged, and its gate.
type Step struct {
	// Percent is 0–100 with at most two decimals, of instances (instance
	// stickiness) or of request keys (key stickiness). 0 is allowed only
	// as the last step of a turn-off: it turns the switch off.
	Percent float64 `json:"percent"`
	// Selector restricts the step to instances whose labels match
	// ("canary=true"); empty is every instance.
	Selector string        `json:"selector,omitempty"`
	Hold     wire.Duration `json:"hold"`
	Gate     Gate          `json:"gate"`
}

// Off reports whether the step turns the switch off.
func (s Step) Off() bool { return s.Percent == 0 }

// Gate decides when a step has done its job.
type Gate struct {
	// MinApplied is the share (0–1] of the step's target instances that
	// must have applied the switch version the step set before its hold
	// starts. 1 (the default) is every live targeted instance; instances
	// that leave the fleet are not waited for. The first step needs at
	// least one instance.
	MinApplied float64 `json:"min_applied"`
	// Conditions must all hold at every measurement of the hold.
	Conditions []Condition `json:"conditions,omitempty"`
	// FailureLimit is how many failed measurements a step tolerates; one
	// more fails the gate (default 0: the first failure fails it).
	FailureLimit int `json:"failure_limit"`
	// OnNoData is what a condition without data counts as: hold (the
	// default: the plan pauses), breaching (a failure) or not_breaching
	// (a pass).
	OnNoData string `json:"on_no_data"`
	// OnError is what a condition whose query failed counts as: hold
	// (the default: the plan waits, and pauses after ErrorLimit in a
	// row), breaching or not_breaching.
	OnError string `json:"on_error"`
	// Interval is how often the conditions are measured during the hold
	// (default 10s); one more measurement closes the hold.
	Interval wire.Duration `json:"interval"`
}

// Condition is a health requirement on a metric source: the measurement
// passes when the query's value <Op> Threshold.
type Condition struct {
	Source    string  `json:"source"` // "fleet" or "prometheus"
	Query     string  `json:"query"`
	Op        string  `json:"op"`
	Threshold float64 `json:"threshold"`
}

// holds reports whether value satisfies the condition.
func (c Condition) holds(v float64) bool { return signal.Op(c.Op).Holds(v, c.Threshold) }

// Templates a person picks in one click.
const (
	TemplateDefault  = "default"
	TemplateCanaries = "canaries"
)

// CanarySelector is the label the canaries template opens the switch to
// first.
const CanarySelector = "canary=true"

// TemplateInfo describes a template for people.
type TemplateInfo struct {
	Name, Direction, Label string
}

// Templates lists the templates, for pickers.
func Templates() []TemplateInfo {
	return []TemplateInfo{
		{TemplateDefault, DirectionOn, "1 % → 5 min → 50 % → 5 min → 100 %"},
		{TemplateCanaries, DirectionOn, "canaries (" + CanarySelector + ") → 10 min → 100 %"},
		{TemplateDefault, DirectionOff, "50 % → 5 min → off"},
	}
}

// Template returns the plan of a template for direction with gate on each
// step (the zero Gate: every targeted instance applies, no conditions).
func Template(name, direction string, gate Gate) (Plan, error) {
	minutes := func(m int) wire.Duration { return wire.Duration(time.Duration(m) * time.Minute) }
	var steps []Step
	switch {
	case name == TemplateDefault && direction == DirectionOn:
		steps = []Step{{Percent: 1, Hold: minutes(5)}, {Percent: 50, Hold: minutes(5)}, {Percent: 100}}
	case name == TemplateDefault && direction == DirectionOff:
		steps = []Step{{Percent: 50, Hold: minutes(5)}, {Percent: 0}}
	case name == TemplateCanaries && direction == DirectionOn:
		steps = []Step{{Percent: 100, Selector: CanarySelector, Hold: minutes(10)}, {Percent: 100}}
	case name == TemplateCanaries:
		return Plan{}, invalid("template", `"canaries" stages a turn-on only`)
	default:
		return Plan{}, invalid("template", fmt.Sprintf("must be %q or %q", TemplateDefault, TemplateCanaries))
	}
	for i := range steps {
		steps[i].Gate = gate
		steps[i].Gate.Conditions = slices.Clone(gate.Conditions)
	}
	return Plan{Direction: direction, Steps: steps, OnFailure: FailRevert}, nil
}

// Input is the API's body to start a plan: a template or explicit steps.
type Input struct {
	Switch    string `json:"switch"`
	Direction string `json:"direction"`
	Template  string `json:"template"`
	// Steps are explicit steps; give them or a template.
	Steps []StepInput `json:"steps"`
	// Gate is the gate of every step that has none of its own (and of
	// every template step).
	Gate      *GateInput `json:"gate"`
	OnFailure string     `json:"on_failure"`
	Reason    string     `json:"reason"`
}

// StepInput is a step as the API takes it.
type StepInput struct {
	// Percent defaults to 100 when a selector is given.
	Percent  *float64   `json:"percent"`
	Selector string     `json:"selector"`
	Hold     string     `json:"hold"`
	Gate     *GateInput `json:"gate"`
}

// GateInput is a gate as the API takes it; absent fields take defaults.
type GateInput struct {
	MinApplied   *float64         `json:"min_applied"`
	Conditions   []ConditionInput `json:"conditions"`
	FailureLimit *int             `json:"failure_limit"`
	OnNoData     string           `json:"on_no_data"`
	OnError      string           `json:"on_error"`
	Interval     string           `json:"interval"`
}

// ConditionInput is a condition as the API takes it.
type ConditionInput struct {
	Source    string   `json:"source"`
	Query     string   `json:"query"`
	Op        string   `json:"op"`
	Threshold *float64 `json:"threshold"`
}

func invalid(field, msg string) error {
	return &server.ValidationError{Fields: []*server.FieldError{{Field: field, Msg: msg}}}
}

// plan turns the input into a plan and validates it; every bad field is
// named, and the conditions' sources and queries are checked for app.
func (in Input) plan(ctx context.Context, sources signal.Sources, app string) (Plan, error) {
	var v server.FieldErrors
	if !wire.ValidName(in.Switch) {
		v.Add("switch", "must name a switch of the app (^[a-z0-9][a-z0-9._-]{0,62}$)")
	}
	direction := cmpOr(in.Direction, DirectionOn)
	if direction != DirectionOn && direction != DirectionOff {
		v.Add("direction", `must be "on" or "off"`)
		direction = DirectionOn
	}
	gate := in.Gate.gate(&v, "gate")
	gate.validate(ctx, sources, app, &v, "gate")
	var p Plan
	switch {
	case in.Template != "" && len(in.Steps) > 0:
		v.Add("steps", "give a template or steps, not both")
	case in.Template != "":
		t, err := Template(in.Template, direction, gate)
		if err != nil {
			addErr(&v, "", err)
		}
		p = t
	case len(in.Steps) == 0:
		v.Add("steps", fmt.Sprintf("give at least one step, or a template (%q)", TemplateDefault))
	default:
		for i, s := range in.Steps {
			f := fmt.Sprintf("steps[%d]", i)
			st := Step{Selector: strings.TrimSpace(s.Selector), Gate: gate}
			switch {
			case s.Percent != nil:
				st.Percent = *s.Percent
			case st.Selector != "":
				st.Percent = 100
			default:
				v.Add(f+".percent", "is required (0–100), unless the step has a selector")
			}
			if s.Hold != "" {
				d, err := server.ParseDuration(s.Hold)
				if err != nil {
					v.Add(f+".hold", `must be a duration such as "5m" or "1d"`)
				}
				st.Hold = wire.Duration(d)
			}
			if s.Gate != nil {
				st.Gate = s.Gate.gate(&v, f+".gate")
				st.Gate.validate(ctx, sources, app, &v, f+".gate")
			}
			p.Steps = append(p.Steps, st)
		}
	}
	p.Direction = direction
	p.OnFailure = cmpOr(in.OnFailure, FailRevert)
	p.Reason = in.Reason
	field := ""
	if in.Template != "" {
		field = "template" // its steps are not the caller's to fix
	}
	if len(p.Steps) > 0 || len(v) == 0 {
		p.validate(ctx, sources, app, &v, field, false)
	}
	return p, v.Err()
}

// gate reads a gate input (nil: the defaults) under field.
func (g *GateInput) gate(v *server.FieldErrors, field string) Gate {
	out := Gate{MinApplied: 1, OnNoData: NoDataPause, OnError: NoDataPause, Interval: wire.Duration(DefaultInterval)}
	if g == nil {
		return out
	}
	if g.MinApplied != nil {
		out.MinApplied = *g.MinApplied
	}
	if g.FailureLimit != nil {
		out.FailureLimit = *g.FailureLimit
	}
	out.OnNoData, out.OnError = treatment(g.OnNoData), treatment(g.OnError)
	if g.Interval != "" {
		d, err := server.ParseDuration(g.Interval)
		if err != nil {
			v.Add(field+".interval", `must be a duration such as "10s"`)
			d = DefaultInterval
		}
		out.Interval = wire.Duration(d)
	}
	for i, c := range g.Conditions {
		cond := Condition{Source: c.Source, Query: c.Query, Op: c.Op}
		if c.Threshold == nil {
			v.Add(fmt.Sprintf("%s.conditions[%d].threshold", field, i), "is required: the number the value is compared with")
		} else {
			cond.Threshold = *c.Threshold
		}
		out.Conditions = append(out.Conditions, cond)
	}
	return out
}

// normalize fills the defaults of a plan built by hand.
func (p *Plan) normalize() {
	p.Direction = cmpOr(p.Direction, DirectionOn)
	p.OnFailure = cmpOr(p.OnFailure, FailRevert)
	for i := range p.Steps {
		g := &p.Steps[i].Gate
		if g.MinApplied == 0 {
			g.MinApplied = 1
		}
		g.OnNoData, g.OnError = treatment(g.OnNoData), treatment(g.OnError)
		if g.Interval == 0 {
			g.Interval = wire.Duration(DefaultInterval)
		}
		p.Steps[i].Selector = strings.TrimSpace(p.Steps[i].Selector)
	}
}

// validate checks a normalized plan, adding to v; field, when set, is the
// field every step error is reported under (a template's); gates says
// whether to check the steps' gates too (the API checks them as given).
func (p *Plan) validate(ctx context.Context, sources signal.Sources, app string, v *server.FieldErrors, field string, gates bool) {
	at := func(f string) string { return cmpOr(field, f) }
	if p.Direction != DirectionOn && p.Direction != DirectionOff {
		v.Add("direction", `must be "on" or "off"`)
	}
	defer func() {
		if p.OnFailure != FailRevert && p.OnFailure != FailPause {
			v.Add("on_failure", `must be "revert" or "pause"`)
		}
	}()
	if len(p.Steps) > maxSteps {
		v.Add(at("steps"), fmt.Sprintf("must be at most %d steps", maxSteps))
		return
	}
	if len(p.Steps) == 0 {
		v.Add(at("steps"), "give at least one step")
		return
	}
	for i, s := range p.Steps {
		f := fmt.Sprintf("steps[%d]", i)
		r := wire.Rollout{Percent: s.Percent, Selector: s.Selector}
		if err := r.Validate(); err != nil {
			addErr(v, at(f), err)
		}
		last := i == len(p.Steps)-1
		switch {
		case s.Off() && p.Direction == DirectionOn:
			v.Add(at(f+".percent"), "must be above 0 in a plan that turns the switch on")
		case s.Off() && !last:
			v.Add(at(f+".percent"), "0 (off) may only be the last step")
		case last && p.Direction == DirectionOff && !s.Off():
			v.Add(at(f+".percent"), "the last step of a turn-off must be 0 (off)")
		case i > 0 && r.Validate() == nil && p.Steps[i-1].valid():
			prev := p.Steps[i-1].rollout("")
			if msg := p.changes(prev, s.rollout("")); msg != "" {
				v.Add(at(f+".percent"), msg+" step "+fmt.Sprint(i)+"'s "+Describe(prev, false))
			}
		}
		if s.Off() && s.Selector != "" {
			v.Add(at(f+".selector"), "an off step has no selector")
		}
		if s.Hold < 0 || s.Hold.D() > maxHold {
			v.Add(at(f+".hold"), "must be between 0s and 168h")
		}
		if gates {
			s.Gate.validate(ctx, sources, app, v, f+".gate")
		}
	}
}

// valid reports whether the step's own rollout fields are valid.
func (s Step) valid() bool {
	return wire.Rollout{Percent: s.Percent, Selector: s.Selector}.Validate() == nil
}

// validate checks a gate, adding to v under field.
func (g Gate) validate(ctx context.Context, sources signal.Sources, app string, v *server.FieldErrors, field string) {
	at := func(f string) string { return field + "." + f }
	if !(g.MinApplied > 0 && g.MinApplied <= 1) {
		v.Add(at("min_applied"), "must be a share above 0 and at most 1 (1: every targeted instance)")
	}
	if g.FailureLimit < 0 || g.FailureLimit > maxFailureLimit {
		v.Add(at("failure_limit"), fmt.Sprintf("must be between 0 and %d", maxFailureLimit))
	}
	if err := signal.CheckTreatment(g.OnNoData); err != nil {
		v.Add(at("on_no_data"), err.Error())
	}
	if err := signal.CheckTreatment(g.OnError); err != nil {
		v.Add(at("on_error"), err.Error())
	}
	if d := g.Interval.D(); d < minInterval || d > maxInterval {
		v.Add(at("interval"), "must be between 1s and 1h")
	}
	if len(g.Conditions) > maxConditions {
		v.Add(at("conditions"), fmt.Sprintf("must be at most %d conditions", maxConditions))
		return
	}
	for i, c := range g.Conditions {
		cf := func(f string) string { return at(fmt.Sprintf("conditions[%d].%s", i, f)) }
		if !slices.Contains(ops, c.Op) {
			v.Add(cf("op"), "must be one of "+strings.Join(ops, " "))
		}
		if math.IsNaN(c.Threshold) || math.IsInf(c.Threshold, 0) {
			v.Add(cf("threshold"), "must be a finite number")
		}
		src, err := sources.For(c.Source, app)
		if err != nil {
			v.Add(cf("source"), err.Error())
			continue
		}
		if err := src.Check(ctx, c.Query); err != nil {
			var qe *signal.QueryError
			if errors.As(err, &qe) {
				v.Add(cf("query"), qe.Msg)
			} else {
				v.Add(cf("query"), "could not be checked: "+err.Error())
			}
		}
	}
}

// rollout is the rollout the step sets, with stickiness.
func (s Step) rollout(stickiness string) wire.Rollout {
	return wire.Rollout{Percent: s.Percent, Stickiness: stickiness, Selector: s.Selector}
}

// changes says what is wrong when next does not move on from prev in the
// plan's direction ("" when it does): a turn-on must only add members, a
// turn-off must only remove them, and every step must change something.
func (p *Plan) changes(prev, next wire.Rollout) string {
	if p.Direction == DirectionOff {
		if next.Percent == 0 {
			return ""
		}
		if next.Percent > prev.Percent || !subset(pairs(prev.Selector), pairs(next.Selector)) {
			return "must narrow (lower percent, same or more selector labels), but widens"
		}
		if next.Percent == prev.Percent && len(pairs(next.Selector)) == len(pairs(prev.Selector)) {
			return "must narrow, but equals"
		}
		return ""
	}
	if next.Percent < prev.Percent || !subset(pairs(next.Selector), pairs(prev.Selector)) {
		return "must only add members (higher percent, same or fewer selector labels), but narrows"
	}
	if next.Percent == prev.Percent && len(pairs(next.Selector)) == len(pairs(prev.Selector)) {
		return "must be increasing, but equals"
	}
	return ""
}

// pairs returns the selector's label pairs ("" has none; an invalid
// selector is reported elsewhere and has none here).
func pairs(sel string) wire.Selector {
	s, _ := wire.ParseSelector(sel)
	return s
}

// subset reports whether every pair of a is in b.
func subset(a, b wire.Selector) bool {
	for _, p := range a {
		if !slices.Contains(b, p) {
			return false
		}
	}
	return true
}

// checkSwitch checks the plan against the switch it is for, as it is now:
// a turn-off needs a switch that is on, and the first step must move on
// from the switch's current rollout.
func (p *Plan) checkSwitch(sw *server.Switch, template bool) error {
	field := "steps[0].percent"
	if template {
		field = "template"
	}
	cur := sw.Rollout()
	cur.Stickiness = ""
	switch {
	case p.Direction == DirectionOff && sw.State != wire.StateOn:
		return invalid("direction", "the switch is off: there is nothing to turn off in stages")
	case p.Direction == DirectionOff || sw.State == wire.StateOn:
		if msg := p.changes(cur, p.Steps[0].rollout("")); msg != "" {
			return invalid(field, "the first step "+msg+" the switch's current rollout ("+Describe(cur, false)+")")
		}
	}
	return nil
}

// Describe writes a rollout for people: "5 %", "100 % where canary=true",
// "off".
func Describe(r wire.Rollout, off bool) string {
	if off {
		return "off"
	}
	s := formatPercent(r.Percent)
	if r.Stickiness == wire.StickyKey {
		s += " of keys"
	}
	if r.Selector != "" {
		s += " where " + r.Selector
	}
	return s
}

// formatPercent writes a percentage: "5 %", "0.5 %", "3.07 %".
func formatPercent(f float64) string {
	s := fmt.Sprintf("%.2f", f)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s + " %"
}

// addErr adds err's field errors to v under prefix (server.FieldErrors.
// AddErr), except that the errors of a template's steps, which are not
// the caller's to fix, are all the template's own.
func addErr(v *server.FieldErrors, prefix string, err error) {
	if prefix != "template" {
		v.AddErr(prefix, err)
		return
	}
	var steps server.FieldErrors
	steps.AddErr("", err)
	for _, f := range steps {
		v.Add(prefix, f.Msg)
	}
}

func cmpOr(s, def string) string {
	if strings.TrimSpace(s) == "" {
		return def
	}
	return strings.TrimSpace(s)
}
