package webui

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/fleet"
	"github.com/switchyard-io/switchyard/server/rollout"
	"github.com/switchyard-io/switchyard/server/signal"
	"github.com/switchyard-io/switchyard/server/trigger"
)

// The auto-trigger pages: each rule's page (its live state, recent
// evaluations, a chart of what it would have done over the last hours, and
// its editor with a preview before saving), and the rules of a switch on
// the switch page, saying when one is paused, locked or waiting for a
// person to confirm recovery.

// triggerPages serves the rule pages.
type triggerPages struct {
	h   *handler
	svc *trigger.Service
}

func (h *handler) registerTriggers(in *gin.RouterGroup, svc *trigger.Service) {
	t := &triggerPages{h: h, svc: svc}
	in.GET("/apps/:app/triggers/new", t.newPage)
	in.POST("/apps/:app/triggers", t.create)
	g := in.Group("/apps/:app/triggers/:name")
	g.GET("", t.rulePage)
	g.POST("/edit", t.edit)
	g.POST("/pause", t.state("pause", svc.Pause, "is paused"))
	g.POST("/resume", t.state("resume", svc.Resume, "is resumed"))
	g.POST("/confirm", t.state("confirm", svc.Confirm, "recovery is confirmed; the switch turns off at the next evaluation"))
	g.POST("/delete", t.delete)
	h.onSwitch["triggers"] = t.section
}

func triggerURL(app, name string) string {
	return Prefix + "/apps/" + url.PathEscape(app) + "/triggers/" + url.PathEscape(name)
}

func newTriggerURL(app, sw string) string {
	return Prefix + "/apps/" + url.PathEscape(app) + "/triggers/new?" + queryString("switch", sw)
}

// TriggerRow is a rule as the pages list it.
type TriggerRow struct {
	trigger.View
	URL string
	// On and Off say in words when the rule turns the switch on and off.
	On, Off string
	// Last is the last evaluated sample in words.
	Last string
}

func triggerRow(v trigger.View) TriggerRow {
	r := TriggerRow{View: v, URL: triggerURL(v.App, v.Name), Last: "not evaluated yet"}
	r.On = fmt.Sprintf("%s %s for %s", v.Trigger.Op, num(v.Trigger.Threshold), shortFor(v.Trigger.For))
	r.Off = fmt.Sprintf("%s %s for %s", v.Recover.Op, num(v.Recover.Threshold), shortFor(v.Recover.For))
	if v.ConfirmRecovery {
		r.Off += ", then a person confirms"
	}
	if l := v.Status.Last; l != nil {
		switch {
		case l.Value != nil:
			r.Last = l.Value.String()
		case l.Outcome == trigger.OutcomeError:
			r.Last = "error: " + l.Error
		default:
			r.Last = "no data"
		}
	}
	return r
}

func num(f float64) string { return trigger.Num(f).String() }

// shortFor writes "0s" as "0s" and "5m0s" as "5m".
func shortFor(s string) string {
	if d, err := server.ParseDuration(s); err == nil {
		return server.ShortDuration(d)
	}
	return s
}

// section is the rules of a switch on its page.
func (t *triggerPages) section(c *gin.Context, sw *server.Switch) (any, error) {
	list, err := t.svc.ForSwitch(c.Request.Context(), sw.App, sw.Name)
	if err != nil {
		return map[string]any{"Rules": []TriggerRow{}, "NewURL": newTriggerURL(sw.App, sw.Name)}, err
	}
	rows := make([]TriggerRow, len(list))
	for i := range list {
		rows[i] = triggerRow(list[i])
	}
	return map[string]any{"Rules": rows, "NewURL": newTriggerURL(sw.App, sw.Name), "Back": switchURL(sw.App, sw.Name)}, nil
}

// editorValues are the form values of a rule (nil: a new rule on switch).
func editorValues(v *trigger.View, sw string) map[string]string {
	if v == nil {
		return map[string]string{
			"switch": sw, "source": "prometheus", "trigger.op": ">", "recover.op": "<", "trigger.for": "30s", "recover.for": "5m",
			"cooldown": server.ShortDuration(trigger.DefaultCooldown), "on_no_data": trigger.DefaultOnNoData, "on_error": trigger.DefaultOnError, "mode": trigger.ModeEnforce,
			"flap.max_transitions": strconv.Itoa(trigger.DefaultFlapMax), "flap.window": server.ShortDuration(trigger.DefaultFlapWindow), "range": "6h",
		}
	}
	out := map[string]string{
		"name": v.Name, "switch": v.Switch, "description": v.Description, "source": v.Source, "query": v.Query,
		"trigger.op": string(v.Trigger.Op), "trigger.threshold": num(v.Trigger.Threshold), "trigger.for": shortFor(v.Trigger.For),
		"recover.op": string(v.Recover.Op), "recover.threshold": num(v.Recover.Threshold), "recover.for": shortFor(v.Recover.For),
		"cooldown": shortFor(v.Cooldown), "max_on": shortFor(v.MaxOn), "on_no_data": v.OnNoData, "on_error": v.OnError, "mode": v.Mode,
		"flap.max_transitions": strconv.Itoa(v.Flap.MaxTransitions), "flap.window": shortFor(v.Flap.Window),
		"version": strconv.FormatInt(v.Version, 10), "range": "6h",
	}
	if v.MaxOn == "0s" {
		out["max_on"] = ""
	}
	if v.ConfirmRecovery {
		out["confirm_recovery"] = "on"
	}
	if v.Rollout != nil && v.Rollout.Template != "" {
		out["rollout.template"] = v.Rollout.Template
	} else if v.Rollout != nil {
		out["rollout.percent"] = strconv.FormatFloat(v.Rollout.Percent, 'f', -1, 64)
	}
	return out
}

// submitted are the editor's values as posted.
func submitted(c *gin.Context) map[string]string {
	_ = c.Request.ParseForm()
	out := map[string]string{}
	for k := range c.Request.PostForm {
		out[k] = strings.TrimSpace(c.Request.PostForm.Get(k))
	}
	return out
}

// ruleInput reads the editor into a rule; field errors name the API's
// fields.
func ruleInput(fp *formParser, app string) trigger.Input {
	in := trigger.Input{
		Name: fp.str("name"), Switch: fp.str("switch"), Description: fp.str("description"), Source: fp.str("source"), Query: fp.str("query"),
		Trigger:  trigger.CondInput{Op: trigger.Op(fp.str("trigger.op")), Threshold: optFloat(fp, "trigger.threshold"), For: fp.str("trigger.for")},
		Recover:  trigger.CondInput{Op: trigger.Op(fp.str("recover.op")), Threshold: optFloat(fp, "recover.threshold"), For: fp.str("recover.for")},
		Cooldown: fp.str("cooldown"), MaxOn: fp.str("max_on"), OnNoData: fp.str("on_no_data"), OnError: fp.str("on_error"), Mode: fp.str("mode"),
		ConfirmRecovery: fp.str("confirm_recovery") == "on", Reason: fp.str("reason"),
		Flap: &trigger.FlapInput{MaxTransitions: new(fp.int("flap.max_transitions")), Window: fp.str("flap.window")},
	}
	if fp.str("flap.max_transitions") == "" && in.Flap.Window == "" {
		in.Flap = nil
	}
	if p := optFloat(fp, "rollout.percent"); p != nil {
		in.Rollout = &trigger.RolloutInput{Percent: *p}
	}
	if tpl := fp.str("rollout.template"); tpl != "" {
		if in.Rollout == nil {
			in.Rollout = &trigger.RolloutInput{}
		}
		in.Rollout.Template = tpl
	}
	checkGrant(fp.c, fp, "app", app)
	return in
}

// optFloat reads a number that may be left empty (nil).
func optFloat(fp *formParser, name string) *float64 {
	if fp.str(name) == "" {
		return nil
	}
	v := fp.float(name)
	return &v
}

// editor is what the rule page and the new-rule page show.
type editor struct {
	App      string
	Rule     *TriggerRow
	Values   map[string]string
	Switches []string
	Sources  []string
	Ops      []trigger.Op
	Fleet    []string // the fleet source's metrics
	// Staged are the staged-rollout templates a rule can start when it fires.
	Staged  []rollout.TemplateInfo
	Preview *previewView
	Evals   []trigger.Evaluation
	// Prometheus tells whether PromQL rules can run; QueryHint is the
	// query field's example.
	Prometheus bool
	QueryHint  string
	Editable   bool
	Interval   time.Duration
}

// previewView is a preview with its chart; Draft when it previews the
// editor's unsaved values.
type previewView struct {
	*trigger.Preview
	Chart Chart
	Range string
	Draft bool
}

// load fills the editor's lists for app.
func (t *triggerPages) editorFor(c *gin.Context, app string, v *trigger.View, vals map[string]string) (*editor, error) {
	e := &editor{App: app, Values: vals, Sources: t.svc.SourceNames(), Ops: trigger.Ops, Fleet: fleet.Metrics(), Interval: t.svc.Interval(), Staged: stagedTemplates()}
	e.Editable = actor(c).CanWrite(app)
	if v != nil {
		row := triggerRow(*v)
		e.Rule = &row
	}
	sws, err := t.h.svc.ListSwitches(c.Request.Context(), app)
	for _, s := range sws {
		e.Switches = append(e.Switches, s.Name)
	}
	// The query's example is one that runs here: PromQL only when a
	// Prometheus is configured, else a fleet metric of the rule's switch.
	e.Prometheus = slices.Contains(e.Sources, signal.SourcePrometheus)
	e.QueryHint = "max(rate(http_errors_total[1m]))"
	if !e.Prometheus {
		sw := vals["switch"]
		if sw == "" && len(e.Switches) > 0 {
			sw = e.Switches[0]
		}
		e.QueryHint = `degraded_rate{switch="` + cmp.Or(sw, "name") + `"}`
	}
	return e, err
}

func (t *triggerPages) newPage(c *gin.Context) {
	app := c.Param("app")
	if !actor(c).CanWrite(app) {
		t.h.message(c, http.StatusForbidden, "Not allowed", "Your role may not create rules for "+app+"; ask an admin for an operator grant.")
		return
	}
	vals, draft := editorValues(nil, c.Query("switch")), isDraft(c)
	if draft {
		vals = draftValues(c)
	}
	e, err := t.editorFor(c, app, nil, vals)
	p := &page{Title: "New auto-trigger for " + app, Nav: "switches", Data: e}
	if err != nil {
		t.h.fail(c, "trigger", p, "page", err)
		return
	}
	if draft {
		fp := &formParser{c: c, from: c.Request.URL.Query()}
		in := ruleInput(fp, app)
		if err = fp.err(); err == nil {
			e.Preview, err = t.preview(c.Request.Context(), actor(c), app, in, vals["range"])
		}
		if err != nil {
			t.h.fail(c, "trigger", p, "rule", err)
			return
		}
		e.Preview.Draft = true
	}
	t.h.render(c, http.StatusOK, "trigger", p)
}

// The editor's Preview posts the draft and is sent on to the page with
// the draft in its query (?draft=1&…), which previews it: reloading that
// page previews again rather than re-posting a form (post/redirect/get).
// The CSRF token and the form's version stay out of the URL.

// draftURL is the page at base previewing the editor's values vals.
func draftURL(base string, vals map[string]string) string {
	q := url.Values{}
	for k, v := range vals {
		if k != csrfField && k != "action" && k != "version" && k != "draft" {
			q.Set(k, v)
		}
	}
	return base + "?draft=1&" + q.Encode()
}

// isDraft reports whether the request previews a draft.
func isDraft(c *gin.Context) bool { return c.Query("draft") != "" }

// draftValues are the editor's values a draft URL carries.
func draftValues(c *gin.Context) map[string]string {
	out := map[string]string{}
	for k := range c.Request.URL.Query() {
		if k != "draft" {
			out[k] = strings.TrimSpace(c.Query(k))
		}
	}
	return out
}

// rulePage shows a rule: its state, its evaluations and a chart of the
// last hours (?range=), and its editor for those who may change it.
func (t *triggerPages) rulePage(c *gin.Context) {
	if !isDraft(c) {
		t.renderRule(c, http.StatusOK, "", nil, nil)
		return
	}
	vals := draftValues(c)
	vals["name"] = c.Param("name")
	fp := &formParser{c: c, from: c.Request.URL.Query()}
	in := ruleInput(fp, c.Param("app"))
	in.Name = vals["name"]
	if err := fp.err(); err != nil {
		t.renderRule(c, 0, "rule", err, vals)
		return
	}
	t.renderPreview(c, c.Param("app"), in, vals)
}

// renderRule renders the page of the rule in the path; form and ferr
// describe a failed form, vals what the editor holds (nil: the rule).
func (t *triggerPages) renderRule(c *gin.Context, status int, form string, ferr error, vals map[string]string) {
	app, name := c.Param("app"), c.Param("name")
	p := &page{Title: "Auto-trigger " + app + "/" + name, Nav: "switches"}
	ctx := c.Request.Context()
	v, err := t.svc.Get(ctx, app, name)
	if err != nil {
		t.h.fail(c, "trigger", p, "page", missing(err, "auto-trigger "+name+" of app "+app))
		return
	}
	if vals == nil {
		vals = editorValues(v, v.Switch)
		if d, err := server.ParseDuration(c.Query("range")); err == nil && d > 0 && d <= 7*24*time.Hour {
			vals["range"] = d.String()
		}
	}
	e, err := t.editorFor(c, app, v, vals)
	p.Data = e
	if err == nil {
		e.Evals, _, err = t.svc.Evaluations(ctx, app, name, server.Page{Limit: 50})
	}
	if a := actor(c); err == nil && e.Preview == nil && c.GetHeader("X-Live") == "" && a.CanWrite(app) {
		// The chart is no live region: a live refresh does not ask the
		// source for hours of history again. Only those who may change
		// the app get it (a preview queries with the console's
		// credentials), and a page past the preview limit shows none.
		e.Preview, err = t.preview(ctx, a, app, v.Input(), vals["range"])
		if errors.Is(err, server.ErrRateLimited) {
			err = nil
		}
	}
	if ferr == nil && err != nil {
		form, ferr = "page", err
	}
	if ferr != nil {
		t.h.fail(c, "trigger", p, form, ferr)
		return
	}
	t.h.render(c, status, "trigger", p)
}

// preview evaluates in over rng (default 6h) and draws it.
func (t *triggerPages) preview(ctx context.Context, a server.Actor, app string, in trigger.Input, rng string) (*previewView, error) {
	pv, err := t.svc.Preview(ctx, a, app, trigger.PreviewInput{Rule: in, Range: rng})
	if err != nil {
		return nil, err
	}
	return &previewView{Preview: pv, Chart: drawChart(pv), Range: pv.End.Sub(pv.Start).String()}, nil
}

// create saves a new rule, or previews it (the editor's Preview button).
func (t *triggerPages) create(c *gin.Context) {
	app := c.Param("app")
	if c.PostForm("action") == "preview" {
		redirect(c, draftURL(Prefix+"/apps/"+url.PathEscape(app)+"/triggers/new", submitted(c)), "")
		return
	}
	fp := &formParser{c: c}
	in := ruleInput(fp, app)
	vals := submitted(c)
	e, err := t.editorFor(c, app, nil, vals)
	p := &page{Title: "New auto-trigger for " + app, Nav: "switches", Data: e}
	switch {
	case err != nil:
		t.h.fail(c, "trigger", p, "page", err)
		return
	case fp.err() != nil:
		t.h.fail(c, "trigger", p, "rule", fp.err())
		return
	}
	v, err := t.svc.Create(c.Request.Context(), actor(c), app, in)
	if err != nil {
		t.h.fail(c, "trigger", p, "rule", err)
		return
	}
	redirect(c, triggerURL(app, v.Name), "Created auto-trigger "+app+"/"+v.Name+" on switch "+v.Switch+".")
}

// edit saves the editor over the rule, or previews it.
func (t *triggerPages) edit(c *gin.Context) {
	app, name := c.Param("app"), c.Param("name")
	if c.PostForm("action") == "preview" {
		redirect(c, draftURL(triggerURL(app, name), submitted(c)), "")
		return
	}
	fp := &formParser{c: c}
	in := ruleInput(fp, app)
	in.Name = name
	vals := submitted(c)
	vals["name"] = name
	if err := fp.err(); err != nil {
		t.renderRule(c, 0, "rule", err, vals)
		return
	}
	fields, err := patchFields(in)
	if err == nil {
		_, err = t.svc.Update(c.Request.Context(), actor(c), app, name, trigger.Patch{Version: fp.int64Ptr("version"), Reason: in.Reason, Fields: fields})
	}
	if err != nil {
		t.renderRule(c, 0, "rule", err, vals)
		return
	}
	redirect(c, triggerURL(app, name), "Saved auto-trigger "+app+"/"+name+".")
}

// renderPreview shows the rule's page with the editor's draft previewed.
func (t *triggerPages) renderPreview(c *gin.Context, app string, in trigger.Input, vals map[string]string) {
	pv, err := t.preview(c.Request.Context(), actor(c), app, in, vals["range"])
	if err != nil {
		t.renderRule(c, 0, "rule", err, vals)
		return
	}
	v, err := t.svc.Get(c.Request.Context(), app, c.Param("name"))
	if err != nil {
		t.renderRule(c, 0, "page", err, vals)
		return
	}
	e, err := t.editorFor(c, app, v, vals)
	if err == nil {
		e.Evals, _, err = t.svc.Evaluations(c.Request.Context(), app, v.Name, server.Page{Limit: 50})
	}
	pv.Draft = true
	e.Preview = pv
	p := &page{Title: "Auto-trigger " + app + "/" + v.Name, Nav: "switches", Data: e}
	if err != nil {
		t.h.fail(c, "trigger", p, "page", err)
		return
	}
	t.h.render(c, http.StatusOK, "trigger", p)
}

// patchFields is the editor's rule as the members of a patch: every field
// the editor has, so a cleared field is cleared.
func patchFields(in trigger.Input) ([]byte, error) {
	m := map[string]any{
		"description": in.Description, "source": in.Source, "query": in.Query, "trigger": in.Trigger, "recover": in.Recover,
		"cooldown": in.Cooldown, "max_on": in.MaxOn, "on_no_data": in.OnNoData, "on_error": in.OnError, "confirm_recovery": in.ConfirmRecovery,
		"flap": in.Flap, "rollout": nil, "mode": in.Mode,
	}
	if r := in.Rollout; r != nil {
		// A merge patch keeps what it does not name: the form names both
		// members, null for the one it leaves empty.
		m["rollout"] = map[string]any{"percent": nilIfZero(r.Percent), "template": nilIfZero(r.Template)}
	}
	return json.Marshal(m)
}

// nilIfZero is v, or nil (JSON null) when v is its type's zero value.
func nilIfZero[T comparable](v T) any {
	var zero T
	if v == zero {
		return nil
	}
	return v
}

// state serves pause, resume and confirm; on success it returns to the
// page the form came from (the switch page or the rule page).
func (t *triggerPages) state(form string, change func(context.Context, server.Actor, string, string, server.Change) (*trigger.View, error), done string) gin.HandlerFunc {
	return func(c *gin.Context) {
		app, name := c.Param("app"), c.Param("name")
		fp := &formParser{c: c}
		if _, err := change(c.Request.Context(), actor(c), app, name, server.Change{Reason: fp.str("reason")}); err != nil {
			if failureOf(err).Status != http.StatusBadRequest {
				// The rule's state changed meanwhile: the form may be gone
				// from the page, so the error goes to the top.
				form = "page"
			}
			t.renderRule(c, 0, form, err, nil)
			return
		}
		redirect(c, t.h.back(c, triggerURL(app, name)), "Auto-trigger "+app+"/"+name+" "+done+".")
	}
}

func (t *triggerPages) delete(c *gin.Context) {
	app, name := c.Param("app"), c.Param("name")
	fp := &formParser{c: c}
	v, _ := t.svc.Get(c.Request.Context(), app, name)
	err := t.svc.Delete(c.Request.Context(), actor(c), app, name, server.Change{Reason: fp.str("reason"), Version: fp.int64Ptr("version")})
	if err != nil {
		t.renderRule(c, 0, "delete", err, nil)
		return
	}
	to := Prefix + "/switches?app=" + url.QueryEscape(app)
	if v != nil {
		to = switchURL(app, v.Switch)
	}
	redirect(c, to, "Deleted auto-trigger "+app+"/"+name+"; the switch stays as it is.")
}

// Chart is a preview drawn as inline SVG: the series, the thresholds as
// lines, spans without data shaded, and a mark where the rule would have
// acted. Coordinates are in the viewBox; the template only places them
// (attributes, no inline styles: the CSP forbids them).
type Chart struct {
	W, H, Left, Top, Right, Bottom float64
	PlotW, PlotH                   float64
	// Where labels go: the y axis's, the x axis's, the thresholds'.
	YLabelX, XLabelY, LabelX     float64
	TriggerLabelY, RecoverLabelY float64
	CenterX, CenterY             float64
	Lines                        []string // polyline points, one per stretch with data
	TriggerY, RecoverY           float64
	TriggerLabel, RecoverLabel   string
	NoData                       []ChartSpan
	Marks                        []ChartMark
	YTicks, XTicks               []ChartTick
	Empty                        bool
	Summary                      string
	// From is where the chart starts when the series begins inside the
	// range (zero: at the range's start).
	From time.Time
}

// ChartSpan is a shaded stretch.
type ChartSpan struct{ X, W float64 }

// ChartMark is where the rule would have acted.
type ChartMark struct {
	X, Y        float64
	Color, Text string
}

// ChartTick is an axis label; Anchor is its SVG text-anchor.
type ChartTick struct {
	At     float64
	Label  string
	Anchor string
}

// drawChart lays out a preview. The time axis starts at the first sample
// when the series begins inside the range (a new rule's few minutes fill
// the chart, not its right edge); the value axis has round ticks and
// stops at 0 when no value or threshold is negative.
func drawChart(p *trigger.Preview) Chart {
	ch := Chart{W: 720, H: 240, Top: 10, Right: 712, Bottom: 210}
	ch.Summary = p.String()
	start := p.Start
	if len(p.Points) > 0 && p.Points[0].At.After(start) {
		start = p.Points[0].At
		ch.From = start
	}
	lo, hi := math.Min(p.Trigger.Threshold, p.Recover.Threshold), math.Max(p.Trigger.Threshold, p.Recover.Threshold)
	for _, pt := range p.Points {
		if v := float64(pt.Value); !math.IsInf(v, 0) {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	nonNegative := lo >= 0
	pad := (hi - lo) * 0.08
	if pad == 0 {
		pad = math.Max(math.Abs(hi)*0.1, 1)
	}
	lo, hi = lo-pad, hi+pad
	if nonNegative {
		lo = math.Max(lo, 0)
	}
	step := niceStep((hi - lo) / 5)
	lo, hi = math.Floor(lo/step)*step, math.Ceil(hi/step)*step
	var labels []string
	for v := lo; v <= hi+step/2; v += step {
		labels = append(labels, tickLabel(v, step))
	}
	// The y labels' column is as wide as the longest label (11 px text).
	widest := 0
	for _, l := range labels {
		widest = max(widest, len(l))
	}
	ch.Left = float64(max(40, 7*widest+14))
	ch.PlotW, ch.PlotH = ch.Right-ch.Left, ch.Bottom-ch.Top
	span := p.End.Sub(start).Seconds()
	x := func(t time.Time) float64 {
		if span <= 0 || t.Before(start) {
			return ch.Left
		}
		return round1(ch.Left + (ch.Right-ch.Left)*t.Sub(start).Seconds()/span)
	}
	y := func(v float64) float64 {
		switch {
		case math.IsInf(v, 1) || v > hi:
			return ch.Top
		case math.IsInf(v, -1) || v < lo:
			return ch.Bottom
		}
		return round1(ch.Bottom - (ch.Bottom-ch.Top)*(v-lo)/(hi-lo))
	}
	ch.TriggerY, ch.RecoverY = y(p.Trigger.Threshold), y(p.Recover.Threshold)
	ch.YLabelX, ch.XLabelY, ch.LabelX = ch.Left-6, ch.Bottom+16, ch.Left+4
	ch.TriggerLabelY, ch.RecoverLabelY = ch.TriggerY-4, ch.RecoverY+13
	if ch.TriggerY > ch.RecoverY { // a downward rule: its trigger line is the lower one
		ch.TriggerLabelY, ch.RecoverLabelY = ch.TriggerY+13, ch.RecoverY-4
	}
	ch.CenterX, ch.CenterY = ch.W/2, ch.H/2
	ch.TriggerLabel = "on " + p.Trigger.String()
	ch.RecoverLabel = "off " + p.Recover.String()
	for _, g := range p.NoData {
		if g.To.After(start) {
			ch.NoData = append(ch.NoData, ChartSpan{X: x(g.From), W: math.Max(x(g.To)-x(g.From), 1)})
		}
	}
	var line strings.Builder
	gap := 0
	for i, pt := range p.Points {
		for gap < len(p.NoData) && !p.NoData[gap].To.After(pt.At) {
			if line.Len() > 0 && i > 0 && p.NoData[gap].From.After(p.Points[i-1].At) {
				ch.Lines = append(ch.Lines, line.String())
				line.Reset()
			}
			gap++
		}
		if line.Len() > 0 {
			line.WriteByte(' ')
		}
		fmt.Fprintf(&line, "%g,%g", x(pt.At), y(float64(pt.Value)))
	}
	if line.Len() > 0 {
		ch.Lines = append(ch.Lines, line.String())
	}
	ch.Empty = len(p.Points) == 0
	for _, ev := range p.Events {
		m := ChartMark{X: x(ev.At), Y: ch.Top, Color: "#5d6673", Text: ev.At.UTC().Format("15:04:05") + " " + string(ev.Action)}
		switch ev.Action {
		case trigger.ActTurnOn:
			m.Color = "#b3261e"
		case trigger.ActTurnOff:
			m.Color = "#1e6b34"
		case trigger.ActLock, trigger.ActHandOff:
			m.Color = "#8a5300"
		}
		if ev.Value != nil {
			m.Y = y(float64(*ev.Value))
			m.Text += " at " + ev.Value.String()
		}
		ch.Marks = append(ch.Marks, m)
	}
	for i, l := range labels {
		ch.YTicks = append(ch.YTicks, ChartTick{At: y(lo + float64(i)*step), Label: l})
	}
	layout := "15:04"
	switch d := p.End.Sub(start); {
	case d < 10*time.Minute:
		layout = "15:04:05"
	case d > 36*time.Hour:
		layout = "Jan 2 15:04"
	}
	// Times on the axis are round (every 5 min, 30 min, 2 h…); one near
	// an edge is anchored inside the chart.
	every := timeStep(p.End.Sub(start) / 5)
	for t := start.UTC().Truncate(every); !t.After(p.End); t = t.Add(every) {
		if t.Before(start) {
			continue
		}
		tk := ChartTick{At: x(t), Label: t.UTC().Format(layout), Anchor: "middle"}
		switch {
		case tk.At-ch.Left < 30:
			tk.Anchor = "start"
		case ch.Right-tk.At < 30:
			tk.Anchor = "end"
		}
		ch.XTicks = append(ch.XTicks, tk)
	}
	return ch
}

// timeSteps are the round spans between the time axis's ticks.
var timeSteps = []time.Duration{time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second,
	time.Minute, 2 * time.Minute, 5 * time.Minute, 10 * time.Minute, 15 * time.Minute, 30 * time.Minute,
	time.Hour, 2 * time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour}

// timeStep is the smallest round span at least raw.
func timeStep(raw time.Duration) time.Duration {
	for _, s := range timeSteps {
		if s >= raw {
			return s
		}
	}
	return timeSteps[len(timeSteps)-1]
}

// niceStep is the round tick step (1, 2, 2.5 or 5 times a power of ten)
// at least raw.
func niceStep(raw float64) float64 {
	if raw <= 0 || math.IsInf(raw, 0) || math.IsNaN(raw) {
		return 1
	}
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5} {
		if m*mag >= raw*(1-1e-9) {
			return m * mag
		}
	}
	return 10 * mag
}

// tickLabel writes v with at most the decimals step needs: "0", "2.5",
// "0.02", "1500".
func tickLabel(v, step float64) string {
	dec := 0
	for d := step; dec < 10 && math.Abs(d-math.Round(d)) > 1e-9*math.Max(1, step); d *= 10 {
		dec++
	}
	s := strconv.FormatFloat(v, 'f', dec, 64)
	if dec > 0 {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	if strings.Trim(s, "-0.") == "" {
		return "0"
	}
	return s
}

func round1(f float64) float64 { return math.Round(f*10) / 10 }

// stagedTemplates are the templates that stage a turn-on.
func stagedTemplates() []rollout.TemplateInfo {
	var out []rollout.TemplateInfo
	for _, t := range rollout.Templates() {
		if t.Direction == rollout.DirectionOn {
			out = append(out, t)
		}
	}
	return out
}
