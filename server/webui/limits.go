package webui

import (
	"cmp"
	"encoding/json"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/switchyard-io/switchyard/sdk/wire"
	"github.com/switchyard-io/switchyard/server"
)

// Param is one kind-specific parameter of a limit rule form.
type Param struct {
	Name, Label, Type, Help string // Type: "float", "int", "duration" or "bool"
	// Default is the value a new rule's form starts with.
	Default string
}

// limitParams lists the parameters of every kind, in form order; the names
// are the JSON fields, so validation errors land next to their input.
var limitParams = map[string][]Param{
	wire.KindTokenBucket: {
		{Name: "rate", Label: "Rate (requests per second)", Type: "float"},
		{Name: "burst", Label: "Burst (bucket size)", Type: "int"},
		{Name: "reserve", Label: "Reserve per criticality step (0–0.45)", Type: "float", Help: "sheddable requests may use 1 − 2×reserve of capacity, degradable 1 − reserve; empty: no priorities"},
		{Name: "warm_up", Label: "Warm-up", Type: "duration", Help: "a raised limit ramps over this period, such as 10s"},
	},
	wire.KindSlidingWindow: {
		{Name: "limit", Label: "Limit (requests per window)", Type: "int"},
		{Name: "window", Label: "Window", Type: "duration", Help: "such as 1s or 1m"},
		{Name: "reserve", Label: "Reserve per criticality step (0–0.45)", Type: "float", Help: "sheddable requests may use 1 − 2×reserve of capacity, degradable 1 − reserve; empty: no priorities"},
	},
	wire.KindConcurrency: {
		{Name: "max", Label: "Max in flight", Type: "int"},
		{Name: "queue_target", Label: "Queue target (CoDel)", Type: "duration", Help: "let requests wait for a slot; such as 5ms; empty: never wait"},
		{Name: "queue_interval", Label: "Queue interval", Type: "duration", Help: "default 100ms"},
		{Name: "lifo", Label: "Newest first under overload", Type: "bool", Help: "true or false"},
		{Name: "reserve", Label: "Reserve per criticality step (0–0.45)", Type: "float", Help: "sheddable requests may use 1 − 2×reserve of capacity, degradable 1 − reserve; empty: no priorities"},
		{Name: "warm_up", Label: "Warm-up", Type: "duration", Help: "a raised limit ramps over this period, such as 10s"},
	},
	wire.KindGCRA: {
		{Name: "rate", Label: "Rate (requests per second)", Type: "float"},
		{Name: "max_wait", Label: "Max wait", Type: "duration", Help: "longest a request may be asked to wait, such as 100ms"},
		{Name: "reserve", Label: "Reserve per criticality step (0–0.45)", Type: "float", Help: "sheddable requests may use 1 − 2×reserve of capacity, degradable 1 − reserve; empty: no priorities"},
	},
	wire.KindAdaptive: {
		{Name: "min", Label: "Min concurrency", Type: "int"},
		{Name: "max", Label: "Max concurrency", Type: "int"},
		{Name: "window", Label: "Window", Type: "duration", Help: "at least 1s; empty for the default"},
		{Name: "reserve", Label: "Reserve per criticality step (0–0.45)", Type: "float", Help: "sheddable requests may use 1 − 2×reserve of capacity, degradable 1 − reserve; empty: no priorities"},
	},
	wire.KindBreaker: {
		{Name: "error_rate", Label: "Error rate (0–1)", Type: "float", Help: "trips when reached"},
		{Name: "slow_call_rate", Label: "Slow call rate (0–1)", Type: "float"},
		{Name: "slow_call_duration", Label: "Slow call duration", Type: "duration", Help: "a call slower than this is slow"},
		{Name: "min_requests", Label: "Min requests per window", Type: "int"},
		{Name: "window", Label: "Window", Type: "duration"},
		{Name: "open_duration", Label: "Open duration", Type: "duration"},
		{Name: "max_open_duration", Label: "Max open duration", Type: "duration", Help: "cap of the growing open period"},
		// The SDK admits at least one probe; the form says so.
		{Name: "half_open_probes", Label: "Half-open probes", Type: "int", Help: "calls let through to test recovery", Default: strconv.Itoa(server.DefaultHalfOpenProbes)},
	},
	wire.KindThrottle: {
		{Name: "k", Label: "K (accepts multiplier, 1–10)", Type: "float", Help: "default 2: throttling starts once the backend refuses half the calls"},
		{Name: "window", Label: "Window", Type: "duration", Help: "default 10s"},
		{Name: "min_requests", Label: "Min requests per window", Type: "int", Help: "default 10"},
		{Name: "reserve", Label: "Reserve per criticality step (0–0.45)", Type: "float", Help: "sheddable requests may use 1 − 2×reserve of capacity, degradable 1 − reserve; empty: no priorities"},
	},
	wire.KindSystem: {
		{Name: "cpu", Label: "CPU threshold (0.05–1)", Type: "float", Help: "default 0.8"},
		{Name: "window", Label: "Window", Type: "duration", Help: "default 10s"},
		{Name: "cooldown", Label: "Cooldown", Type: "duration", Help: "default 1s"},
		{Name: "reserve", Label: "Reserve per criticality step (0–0.45)", Type: "float", Help: "sheddable requests may use 1 − 2×reserve of capacity, degradable 1 − reserve; empty: no priorities"},
	},
}

// newRuleValues are the form values of a rule not yet written: the kind,
// mode and scope a new rule starts with and every parameter's default.
// Parameters are keyed "<kind>.<param>", as the form names its inputs.
func newRuleValues() map[string]string {
	out := map[string]string{"kind": wire.KindTokenBucket, "mode": wire.ModeEnforce, "scope": wire.ScopeInstance}
	for kind, params := range limitParams {
		for _, prm := range params {
			if prm.Default != "" {
				out[kind+"."+prm.Name] = prm.Default
			}
		}
	}
	return out
}

// LimitRow is a limit rule for the list.
type LimitRow struct {
	server.LimitView
	Summary string
}

func limitURL(app, resource string) string {
	return Prefix + "/limits/edit?" + queryString("app", app, "resource", resource)
}

func (h *handler) limitList(c *gin.Context) {
	app := c.Query("app")
	p := &page{Title: "Limit rules", Nav: "limits"}
	list, err := h.svc.ListLimits(c.Request.Context(), app)
	if err != nil {
		h.fail(c, "limits", p, "page", err)
		return
	}
	rows := make([]LimitRow, 0, len(list))
	for i := range list {
		v := list[i].View()
		rows = append(rows, LimitRow{LimitView: v, Summary: summary(list[i].Spec, v.Kind)})
	}
	p.Data = map[string]any{"Rows": rows, "App": app}
	h.render(c, http.StatusOK, "limits", p)
}

// ForceRow is a limit rule on the Overview, with what the fleet says
// about it.
type ForceRow struct {
	LimitRow
	Fleet LimitFleet
}

// limitsInForce lists the rules that can turn requests away — on and in
// enforce mode — and any other rule the fleet reports rejecting now (a
// shadow rule that would reject, a rule turned off that instances still
// enforce); the rejecting ones come first. It counts the rules in force and
// the rules turning requests away now.
func limitsInForce(rules []server.LimitRule, f *fleetView) (rows []ForceRow, enforcing, turning int) {
	for i := range rules {
		v := rules[i].View()
		lf := f.Limit(v.App, v.Resource)
		inForce := v.State == wire.StateOn && v.Mode == wire.ModeEnforce
		if !inForce && !lf.Rejecting() {
			continue
		}
		if inForce {
			enforcing++
		}
		if lf.Turning() {
			turning++
		}
		rows = append(rows, ForceRow{LimitRow: LimitRow{LimitView: v, Summary: summary(rules[i].Spec, v.Kind)}, Fleet: lf})
	}
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := rows[i].Fleet, rows[j].Fleet
		if a.Rejecting() != b.Rejecting() {
			return a.Rejecting()
		}
		return cmp.Or(cmp.Compare(b.RejectedRate, a.RejectedRate), cmp.Compare(b.BreakersOpen, a.BreakersOpen),
			cmp.Compare(b.HalfOpen, a.HalfOpen), cmp.Compare(b.ShadowRate, a.ShadowRate)) < 0
	})
	return rows, enforcing, turning
}

// summary shows a rule's parameters as "rate=100 burst=20".
func summary(spec, kind string) string {
	var m map[string]json.RawMessage
	_ = json.Unmarshal([]byte(spec), &m)
	out := ""
	for _, prm := range limitParams[kind] {
		if v, ok := m[prm.Name]; ok {
			if out != "" {
				out += " "
			}
			out += prm.Name + "=" + compact(v)
		}
	}
	return out
}

// limitPage shows a rule (its editor for those who may change it) or the
// editor of a new rule.
func (h *handler) limitPage(c *gin.Context) {
	app, resource := c.Query("app"), c.Query("resource")
	if resource == "" {
		if !canWriteAny(c) {
			h.message(c, http.StatusForbidden, "Not allowed", "Your role may not create limit rules; ask an admin for an operator grant.")
			return
		}
		h.renderLimit(c, app, nil, newRuleValues())
		return
	}
	if app == "" {
		h.message(c, http.StatusBadRequest, "No app given", "This link names a limit rule without its app; open the rule from the list of limit rules.")
		return
	}
	r, err := h.svc.GetLimit(c.Request.Context(), app, resource)
	if err != nil {
		h.fail(c, "limit", &page{Title: "Limit rule", Nav: "limits"}, "page", missing(err, "limit rule "+resource+" of app "+app))
		return
	}
	h.renderLimit(c, app, r, limitValues(r))
}

// renderLimit renders the page of rule r of app (nil: a new rule) with the
// form values vals.
func (h *handler) renderLimit(c *gin.Context, app string, r *server.LimitRule, vals map[string]string) {
	p := &page{}
	setLimitData(c, p, app, r, vals)
	h.render(c, http.StatusOK, "limit", p)
}

// setLimitData fills p with the page of rule r of app (nil: a new rule)
// and the form values vals. Only those who may change the rule get its
// editor; the others read its facts.
func setLimitData(c *gin.Context, p *page, app string, r *server.LimitRule, vals map[string]string) {
	p.Nav, p.Title = "limits", "New limit rule"
	data := map[string]any{"App": app, "Params": limitParams, "Values": vals, "Editable": canWriteAny(c)}
	if r != nil {
		v := r.View()
		p.Title = "Limit rule " + app + " " + r.Resource
		data["Rule"], data["Editable"], data["Facts"] = v, actor(c).CanWrite(app), ruleFacts(v, limitValues(r))
	}
	p.Data = data
}

// Fact is one labelled value of a read-only rule.
type Fact struct{ Label, Value string }

// ruleFacts describes a rule for those who may only read it, labelled as
// the editor labels its fields.
func ruleFacts(v server.LimitView, vals map[string]string) []Fact {
	out := []Fact{{"Kind", v.Kind}}
	for _, prm := range limitParams[v.Kind] {
		if val := vals[v.Kind+"."+prm.Name]; val != "" {
			out = append(out, Fact{prm.Label, val})
		}
	}
	mode := "enforce (rejects)"
	if v.Mode == wire.ModeShadow {
		mode = "shadow (counts only)"
	}
	out = append(out, Fact{"Mode", mode}, Fact{"Scope", v.Scope})
	switch v.KeyBy.Source {
	case "":
		out = append(out, Fact{"Key by", "nothing (one shared limit)"})
	case "header":
		out = append(out, Fact{"Key by", "header " + v.KeyBy.Name})
	default:
		out = append(out, Fact{"Key by", "context key"})
	}
	if v.KeyBy.Source != "" {
		out = append(out, Fact{"Max keys", cmp.Or(vals["key_by.max_keys"], "default")}, Fact{"Key TTL", cmp.Or(vals["key_by.ttl"], "default")})
	}
	return append(out, Fact{"Description", cmp.Or(v.Description, "—")})
}

// limitValues flattens a stored rule into form values: its own parameters,
// and the defaults of the other kinds for an editor that changes the kind.
func limitValues(r *server.LimitRule) map[string]string {
	w := r.Wire()
	var m map[string]json.RawMessage
	_ = json.Unmarshal(mustJSON(w), &m)
	out := newRuleValues()
	out["kind"], out["mode"], out["scope"], out["resource"], out["description"] = w.Kind, w.Mode, w.Scope, w.Resource, r.Description
	for _, prm := range limitParams[w.Kind] {
		out[w.Kind+"."+prm.Name] = compact(m[prm.Name])
	}
	out["key_by.source"], out["key_by.name"] = w.KeyBy.Source, w.KeyBy.Name
	if w.KeyBy.MaxKeys != 0 {
		out["key_by.max_keys"] = strconv.Itoa(w.KeyBy.MaxKeys)
	}
	if w.KeyBy.TTL != 0 {
		out["key_by.ttl"] = w.KeyBy.TTL.D().String()
	}
	out["version"] = strconv.FormatInt(r.Version, 10)
	return out
}

func mustJSON(v any) []byte { b, _ := json.Marshal(v); return b }

// ruleFields reads the editor into the JSON members of a wire.LimitRule:
// the kind, its own parameters (all of them, so a cleared field is
// cleared: an empty input is null, which takes the parameter's default
// where it has one; an explicit 0 is the API's to refuse), mode, scope
// and key_by.
func ruleFields(fp *formParser) map[string]json.RawMessage {
	kind := fp.str("kind")
	m := map[string]json.RawMessage{
		"kind": mustJSON(kind), "mode": mustJSON(fp.str("mode")), "scope": mustJSON(fp.str("scope")),
	}
	for _, prm := range limitParams[kind] {
		// Inputs are named "<kind>.<param>": kinds share parameter names.
		in := kind + "." + prm.Name
		if fp.str(in) == "" {
			m[prm.Name] = json.RawMessage("null")
			continue
		}
		switch prm.Type {
		case "float":
			m[prm.Name] = mustJSON(fp.float(in))
		case "int":
			m[prm.Name] = mustJSON(fp.int(in))
		case "duration":
			m[prm.Name] = mustJSON(fp.duration(in).D().String())
		case "bool":
			m[prm.Name] = mustJSON(fp.bool(in))
		}
	}
	kb := map[string]any{"source": fp.str("key_by.source"), "name": fp.str("key_by.name")}
	if fp.str("key_by.max_keys") != "" {
		kb["max_keys"] = fp.int("key_by.max_keys")
	}
	if fp.str("key_by.ttl") != "" {
		kb["ttl"] = fp.duration("key_by.ttl").D().String()
	}
	m["key_by"] = mustJSON(kb)
	return m
}

func (p *formParser) bool(name string) bool {
	switch p.str(name) {
	case "", "false":
		return false
	case "true":
		return true
	}
	p.add(name, `must be "true" or "false"`)
	return false
}

func (p *formParser) duration(name string) wire.Duration {
	s := p.str(name)
	if s == "" {
		return 0
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		p.add(name, `must be a duration such as "500ms", "30s" or "5m"`)
	}
	return wire.Duration(d)
}

// saveLimit creates a rule (no version field) or patches it.
func (h *handler) saveLimit(c *gin.Context) {
	fp := &formParser{c: c}
	app, resource := fp.str("app"), fp.str("resource")
	fields := ruleFields(fp)
	_ = c.Request.ParseForm()
	// The other kinds' inputs are not submitted (the page disables them):
	// they keep their defaults for an editor that changes the kind.
	vals := newRuleValues()
	for k := range c.Request.PostForm {
		vals[k] = c.Request.PostForm.Get(k)
	}
	version := fp.int64Ptr("version")
	var rule *server.LimitRule
	if version != nil {
		// Editing: a failed save shows this rule's editor again, not a
		// create form.
		rule, _ = h.svc.GetLimit(c.Request.Context(), app, resource)
	} else {
		checkGrant(c, fp, "app", app)
	}
	p := &page{}
	setLimitData(c, p, app, rule, vals)
	if err := fp.err(); err != nil {
		h.fail(c, "limit", p, "limit", err)
		return
	}
	var (
		rc  server.Receipt
		err error
	)
	if version == nil {
		var in server.LimitInput
		fields["resource"] = mustJSON(resource)
		if err = server.DecodeStrict(mustJSON(fields), &in); err == nil {
			in.Description, in.Reason = fp.str("description"), fp.str("reason")
			_, rc, err = h.svc.CreateLimit(c.Request.Context(), actor(c), app, in)
		}
	} else {
		desc := fp.str("description")
		_, rc, err = h.svc.PatchLimit(c.Request.Context(), actor(c), app, resource, server.LimitPatch{Version: version, Reason: fp.str("reason"), Description: &desc, Fields: fields})
	}
	if err != nil {
		h.fail(c, "limit", p, "limit", err)
		return
	}
	redirect(c, limitURL(app, resource), "Saved limit rule "+app+" "+resource+"."+receiptNote(rc))
}

// limitState turns a rule on or off. The state comes from a hidden field;
// anything but "on" or "off" is refused, never taken for "off".
func (h *handler) limitState(c *gin.Context) {
	fp := &formParser{c: c}
	app, resource, state := fp.str("app"), fp.str("resource"), fp.str("state")
	if state != wire.StateOn && state != wire.StateOff {
		fp.add("state", `must be "on" or "off"`)
	}
	t := server.Toggle{Reason: fp.str("reason"), Version: fp.int64Ptr("version")}
	if err := fp.err(); err != nil {
		h.limitFail(c, app, resource, "state", err)
		return
	}
	_, rc, err := h.svc.SetLimitState(c.Request.Context(), actor(c), app, resource, state, t)
	if err != nil {
		h.limitFail(c, app, resource, "state", err)
		return
	}
	redirect(c, limitURL(app, resource), "Limit rule "+app+" "+resource+" is "+state+"."+receiptNote(rc))
}

func (h *handler) deleteLimit(c *gin.Context) {
	fp := &formParser{c: c}
	app, resource := fp.str("app"), fp.str("resource")
	rc, err := h.svc.DeleteLimit(c.Request.Context(), actor(c), app, resource, server.Change{Reason: fp.str("reason"), Version: fp.int64Ptr("version")})
	if err != nil {
		h.limitFail(c, app, resource, "delete", err)
		return
	}
	redirect(c, Prefix+"/limits?app="+url.QueryEscape(app), "Deleted limit rule "+app+" "+resource+"."+receiptNote(rc))
}

// limitFail shows the rule's page with err attached to form.
func (h *handler) limitFail(c *gin.Context, app, resource, form string, err error) {
	p := &page{Title: "Limit rule " + app + " " + resource, Nav: "limits"}
	r, gerr := h.svc.GetLimit(c.Request.Context(), app, resource)
	if gerr != nil {
		// The rule is gone (or unreadable): say so on a page of its own.
		h.fail(c, "limit", p, "page", missing(err, "limit rule "+resource+" of app "+app))
		return
	}
	setLimitData(c, p, app, r, limitValues(r))
	h.fail(c, "limit", p, form, err)
}
