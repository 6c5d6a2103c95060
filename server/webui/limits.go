package webui

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/switchyard-io/switchyard/sdk/wire"
	"github.com/switchyard-io/switchyard/server"
)

// Param is one kind-specific parameter of a limit rule form.
type Param struct {
	Name, Label, Type, Help string // Type: "float", "int" or "duration"
}

// limitParams lists the parameters of every kind, in form order; the names
// are the JSON fields, so validation errors land next to their input.
var limitParams = map[string][]Param{
	wire.KindTokenBucket: {
		{"rate", "Rate (requests per second)", "float", ""},
		{"burst", "Burst (bucket size)", "int", ""},
	},
	wire.KindSlidingWindow: {
		{"limit", "Limit (requests per window)", "int", ""},
		{"window", "Window", "duration", "such as 1s or 1m"},
	},
	wire.KindConcurrency: {
		{"max", "Max in flight", "int", ""},
	},
	wire.KindGCRA: {
		{"rate", "Rate (requests per second)", "float", ""},
		{"max_wait", "Max wait", "duration", "longest a request may be asked to wait, such as 100ms"},
	},
	wire.KindAdaptive: {
		{"min", "Min concurrency", "int", ""},
		{"max", "Max concurrency", "int", ""},
		{"window", "Window", "duration", "at least 1s; empty for the default"},
	},
	wire.KindBreaker: {
		{"error_rate", "Error rate (0–1)", "float", "trips when reached"},
		{"slow_call_rate", "Slow call rate (0–1)", "float", ""},
		{"slow_call_duration", "Slow call duration", "duration", "a call slower than this is slow"},
		{"min_requests", "Min requests per window", "int", ""},
		{"window", "Window", "duration", ""},
		{"open_duration", "Open duration", "duration", ""},
		{"max_open_duration", "Max open duration", "duration", "cap of the growing open period"},
		{"half_open_probes", "Half-open probes", "int", ""},
	},
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

// limitPage shows the editor: a new rule, or the rule named by app and
// resource.
func (h *handler) limitPage(c *gin.Context) {
	app, resource := c.Query("app"), c.Query("resource")
	p := &page{Title: "New limit rule", Nav: "limits"}
	data := map[string]any{"App": app, "Params": limitParams, "Values": map[string]string{"kind": wire.KindTokenBucket, "mode": wire.ModeEnforce, "scope": wire.ScopeInstance}}
	if resource != "" {
		r, err := h.svc.GetLimit(c.Request.Context(), app, resource)
		if err != nil {
			p.Data = data
			h.fail(c, "limit", p, "page", err)
			return
		}
		p.Title = "Limit rule " + app + " " + resource
		data["Rule"] = r.View()
		data["Values"] = limitValues(r)
	}
	p.Data = data
	h.render(c, http.StatusOK, "limit", p)
}

// limitValues flattens a stored rule into form values.
func limitValues(r *server.LimitRule) map[string]string {
	var m map[string]json.RawMessage
	_ = json.Unmarshal([]byte(r.Spec), &m)
	out := map[string]string{"description": r.Description}
	for k, v := range m {
		out[k] = compact(v)
	}
	w := r.Wire()
	out["key_by.source"], out["key_by.name"] = w.KeyBy.Source, w.KeyBy.Name
	if w.KeyBy.MaxKeys != 0 {
		out["key_by.max_keys"] = compact(json.RawMessage(mustJSON(w.KeyBy.MaxKeys)))
	}
	if w.KeyBy.TTL != 0 {
		out["key_by.ttl"] = w.KeyBy.TTL.D().String()
	}
	out["version"] = compact(json.RawMessage(mustJSON(r.Version)))
	return out
}

func mustJSON(v any) []byte { b, _ := json.Marshal(v); return b }

// ruleFields reads the editor into the JSON members of a wire.LimitRule:
// the kind, its own parameters (all of them, so a cleared field is
// cleared), mode, scope and key_by.
func ruleFields(fp *formParser) map[string]json.RawMessage {
	kind := fp.str("kind")
	m := map[string]json.RawMessage{
		"kind": mustJSON(kind), "mode": mustJSON(fp.str("mode")), "scope": mustJSON(fp.str("scope")),
	}
	for _, prm := range limitParams[kind] {
		// Inputs are named "<kind>.<param>": kinds share parameter names.
		in := kind + "." + prm.Name
		switch prm.Type {
		case "float":
			m[prm.Name] = mustJSON(fp.float(in))
		case "int":
			m[prm.Name] = mustJSON(fp.int(in))
		case "duration":
			m[prm.Name] = mustJSON(fp.duration(in).D().String())
		}
	}
	kb := wire.KeyBy{Source: fp.str("key_by.source"), Name: fp.str("key_by.name"), MaxKeys: fp.int("key_by.max_keys"), TTL: fp.duration("key_by.ttl")}
	m["key_by"] = mustJSON(kb)
	return m
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
	p := &page{Title: "Limit rule", Nav: "limits"}
	vals := map[string]string{}
	_ = c.Request.ParseForm()
	for k := range c.Request.PostForm {
		vals[k] = c.Request.PostForm.Get(k)
		if prm, ok := strings.CutPrefix(k, fp.str("kind")+"."); ok {
			vals[prm] = vals[k]
		}
	}
	data := map[string]any{"App": app, "Params": limitParams, "Values": vals}
	p.Data = data
	version := fp.int64Ptr("version")
	if version != nil {
		// Editing: a failed save shows this rule's editor again, not a
		// create form.
		if r, err := h.svc.GetLimit(c.Request.Context(), app, resource); err == nil {
			data["Rule"] = r.View()
		}
	}
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
		if err = server.DecodeStrict(mustJSON(fields), &in.LimitRule); err == nil {
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

func (h *handler) limitState(c *gin.Context) {
	fp := &formParser{c: c}
	app, resource, state := fp.str("app"), fp.str("resource"), fp.str("state")
	if state != wire.StateOn && state != wire.StateOff {
		state = wire.StateOff
	}
	_, rc, err := h.svc.SetLimitState(c.Request.Context(), actor(c), app, resource, state, server.Toggle{Reason: fp.str("reason"), Version: fp.int64Ptr("version")})
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

// limitFail shows the rule's editor with err attached to form.
func (h *handler) limitFail(c *gin.Context, app, resource, form string, err error) {
	p := &page{Title: "Limit rule " + app + " " + resource, Nav: "limits"}
	data := map[string]any{"App": app, "Params": limitParams, "Values": map[string]string{}}
	if r, gerr := h.svc.GetLimit(c.Request.Context(), app, resource); gerr == nil {
		data["Rule"], data["Values"] = r.View(), limitValues(r)
	}
	p.Data = data
	h.fail(c, "limit", p, form, err)
}
