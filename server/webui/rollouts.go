package webui

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/rollout"
	"github.com/switchyard-io/switchyard/server/signal"
)

// Staged rollouts in the browser: the switch page's "Staged rollout…"
// section (pick a template, see which instances each step reaches, add a
// health condition, start), and a plan page with the step timeline
// (target, applied N/M, gate verdicts and their values, time left in the
// hold), live, with pause, resume, advance and abort.

// rolloutPages are the staged rollouts' pages on the web UI's handler.
type rolloutPages struct {
	*handler
	svc *rollout.Service
}

func (h rolloutPages) register(in *gin.RouterGroup) {
	in.POST("/apps/:app/switches/:name/rollouts", h.startRollout)
	in.GET("/apps/:app/rollouts/:id", h.rolloutPage)
	in.POST("/apps/:app/rollouts/:id/:action", h.rolloutAction)
	h.onSwitch["rollouts"] = h.rolloutSection
}

func rolloutURL(app string, id int64) string {
	return Prefix + "/apps/" + url.PathEscape(app) + "/rollouts/" + strconv.FormatInt(id, 10)
}

// RolloutChoice is a template the switch page offers, with what each of
// its steps would reach now.
type RolloutChoice struct {
	Value string // "<template>/<direction>"
	Label string
	Steps []rollout.StepPreview
	// Err says why the template does not fit the switch now.
	Err string
}

// rolloutSection is the switch page's section: the active plan, the
// last ended ones, and the start form.
func (h rolloutPages) rolloutSection(c *gin.Context, sw *server.Switch) (any, error) {
	svc := h.svc
	ctx := c.Request.Context()
	list, _, err := svc.List(ctx, sw.App, rollout.Filter{Switch: sw.Name, Page: server.Page{Limit: 6}})
	if err != nil {
		return nil, err
	}
	data := map[string]any{"Sources": []string{signal.SourceFleet}, "Ops": rollout.Ops()}
	var recent []rollout.View
	for i := range list {
		if list[i].Active() {
			data["Active"] = &list[i]
		} else if len(recent) < 5 {
			recent = append(recent, list[i])
		}
	}
	data["Recent"] = recent
	if _, err := svc.Sources().For(signal.SourcePrometheus, sw.App); err == nil {
		data["Sources"] = []string{signal.SourceFleet, signal.SourcePrometheus}
	}
	var choices []RolloutChoice
	for _, t := range rollout.Templates() {
		ch := RolloutChoice{Value: t.Name + "/" + t.Direction, Label: t.Label}
		steps, err := svc.Preview(ctx, sw.App, rollout.Input{Switch: sw.Name, Template: t.Name, Direction: t.Direction})
		if err != nil {
			// The template's own problem (it does not fit the switch now).
			f := failureOf(err)
			ch.Err = cmp.Or(f.Fields["template"], f.Fields["direction"], f.Msg)
		}
		ch.Steps = steps
		choices = append(choices, ch)
	}
	data["Choices"] = choices
	return data, nil
}

// startRollout starts a plan from the switch page's form.
func (h rolloutPages) startRollout(c *gin.Context) {
	app, name := c.Param("app"), c.Param("name")
	fp := &formParser{c: c}
	tmpl, direction, _ := strings.Cut(fp.str("template"), "/")
	in := rollout.Input{Switch: name, Template: tmpl, Direction: direction, Reason: fp.str("reason"),
		OnFailure: fp.str("on_failure")}
	gate := &rollout.GateInput{OnNoData: fp.str("on_no_data"), OnError: fp.str("on_error")}
	if q := fp.str("query"); q != "" {
		cond := rollout.ConditionInput{Source: fp.str("source"), Query: q, Op: fp.str("op")}
		if fp.str("threshold") == "" {
			fp.add("gate.conditions[0].threshold", "is required: the number the value is compared with")
		} else {
			t := fp.float("threshold")
			cond.Threshold = &t
		}
		gate.Conditions = []rollout.ConditionInput{cond}
	}
	in.Gate = gate
	if tmpl == "" {
		fp.add("template", "pick a plan")
	}
	if err := fp.err(); err != nil {
		h.switchPage(c, 0, "rollout", err)
		return
	}
	v, err := h.svc.Create(c.Request.Context(), actor(c), app, in)
	if err != nil {
		h.switchPage(c, 0, "rollout", err)
		return
	}
	redirect(c, rolloutURL(app, v.ID), fmt.Sprintf("Started staged rollout #%d of %s/%s: %s.", v.ID, app, name, v.Label()))
}

func (h rolloutPages) rolloutPage(c *gin.Context) { h.renderRollout(c, http.StatusOK, "", nil) }

// renderRollout shows plan :id of :app; form and ferr describe a failed
// form on it.
func (h rolloutPages) renderRollout(c *gin.Context, status int, form string, ferr error) {
	app := c.Param("app")
	// Fleet: instance acks refresh the timeline's applied N/M as they come.
	p := &page{Title: "Staged rollout", Nav: "switches", Fleet: true}
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil {
		h.fail(c, "rollout", p, "page", missing(server.ErrNotFound, "staged rollout "+c.Param("id")))
		return
	}
	v, err := h.svc.Get(c.Request.Context(), app, id)
	if err != nil {
		h.fail(c, "rollout", p, "page", missing(err, fmt.Sprintf("staged rollout #%d of %s", id, app)))
		return
	}
	p.Title = fmt.Sprintf("Staged rollout #%d of %s/%s", v.ID, v.App, v.Switch)
	p.Data = map[string]any{"R": v, "Rows": timeline(v), "SwitchURL": switchURL(v.App, v.Switch)}
	if ferr != nil {
		h.fail(c, "rollout", p, form, ferr)
		return
	}
	h.render(c, status, "rollout", p)
}

// rolloutAction pauses, resumes, aborts or advances a plan.
func (h rolloutPages) rolloutAction(c *gin.Context) {
	app, action := c.Param("app"), c.Param("action")
	svc := h.svc
	do := map[string]func(context.Context, server.Actor, string, int64, rollout.ActionInput) (*rollout.View, error){
		"pause": svc.Pause, "resume": svc.Resume, "abort": svc.Abort, "advance": svc.Advance,
	}[action]
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if do == nil || err != nil {
		h.notFound(c)
		return
	}
	fp := &formParser{c: c}
	in := rollout.ActionInput{Reason: fp.str("reason"), Version: fp.int64Ptr("version"), Revert: fp.str("revert") == "yes"}
	if err := fp.err(); err != nil {
		h.renderRollout(c, 0, action, err)
		return
	}
	v, err := do(c.Request.Context(), actor(c), app, id, in)
	if err != nil {
		h.renderRollout(c, 0, action, err)
		return
	}
	redirect(c, rolloutURL(app, id), fmt.Sprintf("Staged rollout #%d: %s requested; it is %s.", v.ID, action, v.State))
}

// TimelineRow is one step of the plan page's timeline: an applied step's
// record, or a step still to come.
type TimelineRow struct {
	N       int // 1-based
	Target  string
	Raised  string
	Hold    string
	Status  string
	Current bool
	// Applied of Targeted instances applied it (Counted: known).
	Counted           bool
	Applied, Targeted int
	Needed            int
	Instances         []rollout.LiveInstance
	Verdicts          []VerdictRow
	Measurements      int
	Failures          int
	HoldLeft          string
	HoldEndsAt        *time.Time
	StartedAt         *time.Time
	ConvergedAt       *time.Time
	EndedAt           *time.Time
	Why               string
}

// VerdictRow is a condition's last verdict.
type VerdictRow struct {
	Condition string
	Outcome   string
	Value     string
	Error     string
}

// timeline builds the rows of plan v.
func timeline(v *rollout.View) []TimelineRow {
	var rows []TimelineRow
	last := -1
	for i := range v.History {
		rec := &v.History[i]
		step := v.Steps[rec.Index]
		current := i == len(v.History)-1 && v.Active() && rec.EndedAt == nil
		r := TimelineRow{
			N: rec.Index + 1, Target: rec.Target, Raised: rec.Raised, Hold: holdText(step), Current: current,
			Counted: rec.Revision > 0, Applied: rec.Applied, Targeted: rec.Targeted,
			Needed:       rollout.Needed(step.Gate.MinApplied, rec.Targeted),
			Measurements: rec.Measurements, Failures: rec.Failures, HoldLeft: rec.HoldLeft, HoldEndsAt: rec.HoldEndsAt,
			StartedAt: &rec.StartedAt, ConvergedAt: rec.ConvergedAt, EndedAt: rec.EndedAt, Why: rec.Why,
		}
		if rec.EndedAt != nil {
			// An ended step (passed, advanced by a person, failed) no
			// longer has a hold that ends: the row says when it ended.
			r.HoldLeft, r.HoldEndsAt = "", nil
		}
		switch {
		case rec.EndedAt != nil:
			r.Status = rec.Outcome
		case !v.Active():
			r.Status = v.State
		case v.State == rollout.Paused:
			r.Status = "paused"
		case rec.ConvergedAt == nil:
			r.Status = "converging"
		case r.HoldLeft != "":
			r.Status = "holding"
		default:
			r.Status = "measuring"
		}
		if current && rec.ConvergedAt == nil && v.Live != nil {
			r.Counted = v.Live.Published
			r.Applied, r.Targeted, r.Needed = v.Live.Applied, v.Live.Targeted, v.Live.Needed
		}
		if current && v.Live != nil {
			r.Instances = v.Live.Instances
		} else {
			for _, id := range rec.Instances {
				r.Instances = append(r.Instances, rollout.LiveInstance{ID: id, Applied: true})
			}
		}
		for _, vd := range rec.Verdicts {
			row := VerdictRow{Outcome: vd.Outcome, Error: vd.Error}
			if vd.Condition < len(step.Gate.Conditions) {
				cond := step.Gate.Conditions[vd.Condition]
				row.Condition = fmt.Sprintf("%s: %s %s %s", cond.Source, cond.Query, cond.Op, rollout.Number(cond.Threshold))
			}
			if vd.Value != nil {
				row.Value = vd.Value.String()
			}
			r.Verdicts = append(r.Verdicts, row)
		}
		rows = append(rows, r)
		last = max(last, rec.Index)
	}
	if !v.Active() {
		return rows
	}
	// Steps to come target what the job will set, as the switch page's
	// preview said: a step below a raised first step is kept at the raise.
	plan := rollout.Plan{Direction: v.Direction, Steps: v.Steps}
	var prev *rollout.StepRecord
	cur := v.Before.Rollout
	if n := len(v.History); n > 0 {
		prev = &v.History[n-1].StepRecord
		cur = prev.Rollout
	}
	for k := last + 1; k < len(v.Steps); k++ {
		r, off, raised := rollout.Target(plan, k, v.App, v.Switch, cur, prev, nil)
		rows = append(rows, TimelineRow{N: k + 1, Target: rollout.Describe(r, off), Raised: raised, Hold: holdText(v.Steps[k]), Status: "to come"})
		prev, cur = &rollout.StepRecord{Index: k, Rollout: r, Off: off}, r
	}
	return rows
}

func holdText(s rollout.Step) string {
	if s.Hold <= 0 {
		return "no hold"
	}
	return server.ShortDuration(s.Hold.D())
}
