package webui

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/sdk/wire"
	"github.com/switchyard-io/switchyard/server"
)

// SwitchRow is a switch with what the fleet says about it.
type SwitchRow struct {
	server.SwitchView
	// Fleet is set for switches that are on (the pages show nothing of the
	// fleet for the others).
	Fleet SwitchFleet
}

// switchRows adds the fleet's view to the switches of list that are on;
// spark adds their sparklines.
func switchRows(list []server.Switch, f *fleetView, spark bool) []SwitchRow {
	out := make([]SwitchRow, 0, len(list))
	for i := range list {
		s := &list[i]
		row := SwitchRow{SwitchView: s.View()}
		if s.State == wire.StateOn {
			row.Fleet = f.Switch(s, spark)
		}
		out = append(out, row)
	}
	return out
}

func switchURL(app, name string) string {
	return Prefix + "/apps/" + url.PathEscape(app) + "/switches/" + url.PathEscape(name)
}

// overview is "what is degraded now": every switch that is on and every
// limit rule in force, plus a form that turns a switch on.
func (h *handler) overview(c *gin.Context) { h.renderOverview(c, "", nil) }

// renderOverview shows the overview; form and ferr describe a failed form
// on it (a row's turn-off, or the turn-on form "quickon").
func (h *handler) renderOverview(c *gin.Context, form string, ferr error) {
	p := &page{Title: "What is degraded now", Nav: "overview", Fleet: true}
	list, err := h.svc.ListSwitches(c.Request.Context(), "")
	if err != nil {
		p.Data = map[string]any{"Fleet": &fleetView{}}
		h.fail(c, "overview", p, "page", err)
		return
	}
	rules, err := h.svc.ListLimits(c.Request.Context(), "")
	if err != nil {
		p.Data = map[string]any{"Fleet": &fleetView{}}
		h.fail(c, "overview", p, "page", err)
		return
	}
	var on, off []server.Switch
	a := actor(c)
	for _, s := range list {
		switch {
		case s.State == wire.StateOn:
			on = append(on, s)
		case a.CanWrite(s.App):
			off = append(off, s)
		}
	}
	f := h.fleetView(c)
	sections, serr := h.overviewSections(c)
	limits, enforcing, turning := limitsInForce(rules, f)
	p.Data = map[string]any{
		"On": switchRows(on, f, true), "Off": off, "Total": len(list),
		"Limits": limits, "Enforcing": enforcing, "Turning": turning, "Fleet": f, "Sections": sections,
	}
	if ferr == nil && serr != nil {
		form, ferr = "page", serr
	}
	if ferr != nil {
		// The row of a switch that is off by now is gone, and its error
		// with it: show that at the top.
		shown := form == "quickon" && canWriteAny(c) ||
			slices.ContainsFunc(on, func(s server.Switch) bool { return form == "off:"+s.App+"/"+s.Name })
		if !shown {
			form = "page"
		}
		h.fail(c, "overview", p, form, ferr)
		return
	}
	h.render(c, http.StatusOK, "overview", p)
}

// switchList lists switches with filters app, level, state and owner.
func (h *handler) switchList(c *gin.Context) {
	filter := map[string]string{"app": c.Query("app"), "level": c.Query("level"), "state": c.Query("state"), "owner": c.Query("owner")}
	p := &page{Title: "Switches", Nav: "switches", Fleet: true}
	list, err := h.svc.ListSwitches(c.Request.Context(), filter["app"])
	if err != nil {
		h.fail(c, "switches", p, "page", err)
		return
	}
	var keep []server.Switch
	owners := map[string]bool{}
	for _, s := range list {
		owners[s.Owner] = s.Owner != ""
		if (filter["level"] == "" || string(s.Level) == filter["level"]) &&
			(filter["state"] == "" || s.State == filter["state"]) &&
			(filter["owner"] == "" || strings.Contains(strings.ToLower(s.Owner), strings.ToLower(filter["owner"]))) {
			keep = append(keep, s)
		}
	}
	if filter["app"] != "" {
		p.Title = "Switches of " + filter["app"]
	}
	p.Data = map[string]any{"Rows": switchRows(keep, h.fleetView(c), false), "Filter": filter, "Count": len(list)}
	h.render(c, http.StatusOK, "switches", p)
}

// switchPage renders the detail page of a switch; form and err describe a
// failed form on it.
func (h *handler) switchPage(c *gin.Context, status int, form string, ferr error) {
	if held(c, ferr) {
		return
	}
	app, name := c.Param("app"), c.Param("name")
	p := &page{Title: app + "/" + name, Nav: "switches", Fleet: true}
	sw, err := h.svc.GetSwitch(c.Request.Context(), app, name)
	if err != nil {
		if form == "" || errors.Is(err, server.ErrNotFound) {
			form, ferr = "page", missing(err, "switch "+app+"/"+name)
		}
		p.Data = map[string]any{"Missing": true, "App": app, "Name": name}
		h.fail(c, "switch", p, form, ferr)
		return
	}
	events, next, err := h.svc.ListAudit(c.Request.Context(), audit.Filter{Target: sw.Target(), Limit: 50, BeforeID: cursor(c.Query("before"))})
	if err != nil {
		h.fail(c, "switch", p, "page", err)
		return
	}
	fallback := ""
	if sw.Fallback != "" {
		fallback = prettyJSON(sw.Fallback)
	}
	history := eventRows(events)
	sections, serr := h.switchSections(c, sw)
	p.Data = map[string]any{
		"S": sw.View(), "Fleet": h.fleetView(c).Switch(sw, true),
		"History": history, "Next": next, "Fallback": fallback, "Sections": sections,
	}
	if ferr == nil && serr != nil {
		form, ferr = "page", serr
	}
	if ferr != nil {
		if !detailShows(form, sw, history) {
			form = "page"
		}
		h.fail(c, "switch", p, form, ferr)
		return
	}
	h.render(c, status, "switch", p)
}

// detailShows says whether the detail page of sw has form on it. A form
// that is gone (the switch is off already, the event is on an older page)
// has its error shown at the top of the page instead.
func detailShows(form string, sw *server.Switch, history []EventRow) bool {
	if form == "off" {
		return sw.State == wire.StateOn
	}
	if id, ok := strings.CutPrefix(form, "rollback:"); ok {
		for _, e := range history {
			if e.Restorable && strconv.FormatInt(e.ID, 10) == id {
				return true
			}
		}
		return false
	}
	return true
}

// cursor parses a paging cursor; anything but a positive id means "newest".
func cursor(s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

func (h *handler) switchDetail(c *gin.Context) { h.switchPage(c, http.StatusOK, "", nil) }

// turnOn puts a switch on from its detail page or the switch list.
func (h *handler) turnOn(c *gin.Context) {
	h.turnOnSwitch(c, c.Param("app"), c.Param("name"), func(err error) { h.switchPage(c, 0, "on", err) })
}

// quickOn puts on the switch the Overview's form names in its "switch"
// field ("app/name"); its errors show in that form, with what was typed.
func (h *handler) quickOn(c *gin.Context) {
	fp := &formParser{c: c}
	app, name, _ := strings.Cut(fp.str("switch"), "/")
	onErr := func(err error) { h.renderOverview(c, "quickon", err) }
	if !wire.ValidApp(app) || name == "" {
		fp.add("switch", "must name a switch as app/name, such as checkout/recommend")
	} else {
		checkGrant(c, fp, "switch", app)
	}
	if err := fp.err(); err != nil {
		onErr(err)
		return
	}
	h.turnOnSwitch(c, app, name, func(err error) {
		if errors.Is(err, server.ErrNotFound) {
			err = &server.ValidationError{Fields: []*server.FieldError{{Field: "switch", Msg: "there is no switch " + app + "/" + name}}}
		}
		onErr(err)
	})
}

// turnOnSwitch puts app/name on with the form's reason and rollout; onErr
// shows a failure where the form was. A rollout without stickiness or
// selector fields keeps the switch's own. L4, L5 and 100 % need a
// confirmation step, which the server renders itself, so it holds without
// JavaScript too.
func (h *handler) turnOnSwitch(c *gin.Context, app, name string, onErr func(error)) {
	fp := &formParser{c: c}
	t := server.Toggle{Reason: fp.str("reason"), Version: fp.int64Ptr("version")}
	r := wire.Rollout{Percent: fp.float("percent"), Stickiness: fp.str("stickiness"), Selector: fp.str("selector")}
	if fp.str("percent") == "" {
		fp.add("rollout.percent", "is required: 0–100")
	}
	t.Rollout = &r
	if strings.TrimSpace(t.Reason) == "" {
		fp.add("reason", "is required: say why you make this change")
	}
	if err := fp.err(); err != nil {
		onErr(err)
		return
	}
	sw, err := h.svc.GetSwitch(c.Request.Context(), app, name)
	if err != nil {
		onErr(err)
		return
	}
	if _, ok := c.Request.PostForm["stickiness"]; !ok {
		r.Stickiness = sw.Rollout().Stickiness
	}
	if _, ok := c.Request.PostForm["selector"]; !ok {
		r.Selector = sw.Rollout().Selector
	}
	// Key lists are pasted into the on form; forms without them keep the
	// switch's.
	if _, ok := c.Request.PostForm["include"]; ok {
		r.Include = fp.keys("include")
	} else {
		r.Include = sw.Rollout().Include
	}
	if _, ok := c.Request.PostForm["exclude"]; ok {
		r.Exclude = fp.keys("exclude")
	} else {
		r.Exclude = sw.Rollout().Exclude
	}
	if server.NeedsConfirmation(sw.Level, r.Percent) && !confirmed(c) {
		h.confirm(c, sw, "turn "+app+"/"+name+" on", "/on", sw.Level, r)
		return
	}
	_, rc, err := h.svc.TurnOn(c.Request.Context(), actor(c), app, name, t)
	if held(c, err) {
		return
	}
	if err != nil {
		onErr(err)
		return
	}
	redirect(c, h.back(c, switchURL(app, name)), app+"/"+name+" is on at "+percent(r.Percent)+"."+receiptNote(rc))
}

func confirmed(c *gin.Context) bool { return c.PostForm("confirmed") == "yes" }

// confirm asks for a second click before a change that leaves sw on at
// level and rollout r: it posts the same form again to the switch's action
// with confirmed=yes.
func (h *handler) confirm(c *gin.Context, sw *server.Switch, what, action string, level wire.Level, r wire.Rollout) {
	_ = c.Request.ParseForm()
	h.render(c, http.StatusOK, "confirm", &page{
		Title: "Confirm: " + what, Nav: "switches",
		Data: map[string]any{"S": sw.View(), "Action": switchURL(sw.App, sw.Name) + action, "Level": level, "Rollout": r, "Values": c.Request.PostForm},
	})
}

// back is where a successful form returns to: its "back" field when that is
// one of our pages, else def.
func (h *handler) back(c *gin.Context, def string) string {
	if b := c.PostForm("back"); b != "" && safeNext(b) == b {
		return b
	}
	return def
}

func (h *handler) turnOff(c *gin.Context) {
	app, name := c.Param("app"), c.Param("name")
	fp := &formParser{c: c}
	t := server.Toggle{Reason: fp.str("reason"), Version: fp.int64Ptr("version")}
	_, rc, err := h.svc.TurnOff(c.Request.Context(), actor(c), app, name, t)
	if err != nil {
		if b := c.PostForm("back"); b == Prefix+"/" {
			h.renderOverview(c, "off:"+app+"/"+name, err)
			return
		}
		h.switchPage(c, 0, "off", err)
		return
	}
	redirect(c, h.back(c, switchURL(app, name)), app+"/"+name+" is off."+receiptNote(rc))
}

// switchFields reads the level and the fallback JSON of the create and edit
// forms.
func switchFields(fp *formParser) (level wire.Level, fallback json.RawMessage) {
	level = wire.Level(fp.str("level"))
	if fb := fp.str("fallback"); fb != "" {
		if !json.Valid([]byte(fb)) {
			fp.add("fallback", "must be valid JSON")
		}
		fallback = json.RawMessage(fb)
	}
	return level, fallback
}

// newSwitchData holds the defaults of the create form: the API's.
func newSwitchData(app string) map[string]any {
	return map[string]any{"App": app, "S": server.SwitchView{Level: wire.L3, MaxOn: server.ShortDuration(server.DefaultMaxOn), ExpiryPolicy: server.ExpiryRemind}}
}

func (h *handler) newSwitchPage(c *gin.Context) {
	if !canWriteAny(c) {
		h.message(c, http.StatusForbidden, "Not allowed", "Your role may not create switches; ask an admin for an operator grant.")
		return
	}
	h.render(c, http.StatusOK, "newswitch", &page{Title: "New switch", Nav: "switches", Data: newSwitchData(c.Query("app"))})
}

func (h *handler) createSwitch(c *gin.Context) {
	fp := &formParser{c: c}
	app := fp.str("app")
	level, fallback := switchFields(fp)
	in := server.SwitchInput{
		Name: fp.str("name"), Level: level, Description: fp.str("description"), Owner: fp.str("owner"),
		Runbook: fp.str("runbook"), Fallback: fallback, MaxStaleness: fp.str("max_staleness"), WarmUp: fp.str("warm_up"),
		MaxOn: fp.str("max_on"), ExpiryPolicy: fp.str("expiry_policy"), Reason: fp.str("reason"),
	}
	p := &page{Title: "New switch", Nav: "switches", Data: newSwitchData(app)}
	if !wire.ValidApp(app) {
		fp.add("app", "must match ^[a-z0-9][a-z0-9._-]{0,62}$")
	} else {
		checkGrant(c, fp, "app", app)
	}
	if err := fp.err(); err != nil {
		h.fail(c, "newswitch", p, "new", err)
		return
	}
	sw, rc, err := h.svc.CreateSwitch(c.Request.Context(), actor(c), app, in)
	if err != nil {
		h.fail(c, "newswitch", p, "new", err)
		return
	}
	redirect(c, switchURL(sw.App, sw.Name), "Created "+sw.App+"/"+sw.Name+" (off)."+receiptNote(rc))
}

func (h *handler) editSwitch(c *gin.Context) {
	app, name := c.Param("app"), c.Param("name")
	fp := &formParser{c: c}
	level, fallback := switchFields(fp)
	str := func(k string) *string { v := fp.str(k); return &v }
	pt := server.SwitchPatch{
		Version: fp.int64Ptr("version"), Reason: fp.str("reason"), Level: &level,
		Description: str("description"), Owner: str("owner"), Runbook: str("runbook"),
		MaxStaleness: str("max_staleness"), WarmUp: str("warm_up"), MaxOn: str("max_on"), ExpiryPolicy: str("expiry_policy"),
	}
	if fallback == nil {
		fallback = json.RawMessage("null")
	}
	pt.Fallback = &fallback
	if err := fp.err(); err != nil {
		h.switchPage(c, 0, "edit", err)
		return
	}
	// A switch that is on and moves to L4 or L5 starts failing or queueing
	// writes at once.
	if sw, err := h.svc.GetSwitch(c.Request.Context(), app, name); err == nil && sw.State == wire.StateOn && level != sw.Level && server.NeedsConfirmation(level, 0) && !confirmed(c) {
		h.confirm(c, sw, "change "+app+"/"+name+" to "+string(level)+" while it is on", "/edit", level, sw.Rollout())
		return
	}
	_, rc, err := h.svc.PatchSwitch(c.Request.Context(), actor(c), app, name, pt)
	if err != nil {
		h.switchPage(c, 0, "edit", err)
		return
	}
	redirect(c, switchURL(app, name), "Saved "+app+"/"+name+"."+receiptNote(rc))
}

func (h *handler) rollback(c *gin.Context) {
	app, name := c.Param("app"), c.Param("name")
	fp := &formParser{c: c}
	id := fp.int64Ptr("event")
	form := "rollback:" + fp.str("event")
	if id == nil {
		h.switchPage(c, 0, form, errors.Join(fp.err(), &server.ValidationError{Fields: []*server.FieldError{{Field: "event", Msg: "is required"}}}))
		return
	}
	if sw, after := h.restores(c, app, name, *id); after != nil && after.State == wire.StateOn && server.NeedsConfirmation(after.Level, after.Rollout.Percent) && !confirmed(c) {
		h.confirm(c, sw, "roll "+app+"/"+name+" back to its state after #"+fp.str("event"), "/rollback", after.Level, after.Rollout)
		return
	}
	_, rc, err := h.svc.RollbackSwitch(c.Request.Context(), actor(c), app, name, *id, server.Change{Reason: fp.str("reason"), Version: fp.int64Ptr("version")})
	if err != nil {
		h.switchPage(c, 0, form, err)
		return
	}
	redirect(c, switchURL(app, name), "Rolled "+app+"/"+name+" back to its state after event #"+fp.str("event")+"."+receiptNote(rc))
}

// restores returns the switch and the state that rolling it back to event
// id restores; nil when either is unknown (the rollback then says why).
func (h *handler) restores(c *gin.Context, app, name string, id int64) (*server.Switch, *server.SwitchView) {
	sw, err := h.svc.GetSwitch(c.Request.Context(), app, name)
	if err != nil {
		return nil, nil
	}
	v, err := h.svc.RollbackTarget(c.Request.Context(), app, name, id)
	if err != nil {
		return nil, nil
	}
	return sw, v
}

func (h *handler) deleteSwitch(c *gin.Context) {
	app, name := c.Param("app"), c.Param("name")
	fp := &formParser{c: c}
	rc, err := h.svc.DeleteSwitch(c.Request.Context(), actor(c), app, name, server.Change{Reason: fp.str("reason"), Version: fp.int64Ptr("version")})
	if err != nil {
		h.switchPage(c, 0, "delete", err)
		return
	}
	redirect(c, Prefix+"/switches?app="+url.QueryEscape(app), "Deleted "+app+"/"+name+"."+receiptNote(rc))
}
