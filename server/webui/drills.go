package webui

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/drill"
)

// drillPages are the drill pages: a run's report with live progress, run
// now, dry run and abort; and the drills section of the switch page.
type drillPages struct {
	h   *handler
	svc *drill.Service
}

func (d drillPages) register(in *gin.RouterGroup) {
	g := in.Group("/apps/:app/drills/:name")
	g.GET("", d.drillPage)
	g.POST("/runs", d.start)
	g.GET("/runs/:run", d.runPage)
	g.GET("/runs/:run/report.md", d.download(true))
	g.GET("/runs/:run/report.json", d.download(false))
	g.POST("/runs/:run/abort", d.abort)
	d.h.onSwitch["drills"] = d.section
}

func drillURL(app, name string) string {
	return Prefix + "/apps/" + url.PathEscape(app) + "/drills/" + url.PathEscape(name)
}

func runURL(app, name string, n int64) string {
	return drillURL(app, name) + "/runs/" + strconv.FormatInt(n, 10)
}

// drillPage is where a link to a drill leads (findings, the audit log):
// the drill's card on its switch's page.
func (d drillPages) drillPage(c *gin.Context) {
	app, name := c.Param("app"), c.Param("name")
	dr, err := d.svc.Get(c.Request.Context(), app, name)
	if err != nil {
		d.h.fail(c, "message", &page{Title: "Drill " + app + "/" + name, Nav: "switches"}, "page", missing(err, "drill "+name+" of app "+app))
		return
	}
	c.Redirect(http.StatusSeeOther, switchURL(app, dr.SwitchName)+"#drill-"+url.PathEscape(name))
}

// DrillRow is one drill on the switch page: its settings, next run, last
// runs and the run in progress.
type DrillRow struct {
	drill.DrillView
	Runs []drill.RunView
	Open *drill.RunView
}

// section loads the drills of a switch for its page.
func (d drillPages) section(c *gin.Context, sw *server.Switch) (any, error) {
	ctx := c.Request.Context()
	list, err := d.svc.ForSwitch(ctx, sw.App, sw.Name)
	if err != nil {
		return nil, err
	}
	rows := make([]DrillRow, 0, len(list))
	for i := range list {
		row := DrillRow{DrillView: list[i].ViewFor(d.svc.Now(), actor(c).CanWrite(sw.App))}
		runs, _, err := d.svc.Runs(ctx, sw.App, list[i].Name, server.Page{Limit: 5})
		if err != nil {
			return nil, err
		}
		for j := range runs {
			v := runs[j].ViewFor(actor(c).CanWrite(sw.App))
			if runs[j].Open() {
				row.Open = &v
			}
			row.Runs = append(row.Runs, v)
		}
		rows = append(rows, row)
	}
	return map[string]any{"Drills": rows}, nil
}

// run reads the run the path names; false when it answered.
func (d drillPages) run(c *gin.Context) (*drill.Run, bool) {
	n, err := strconv.ParseInt(c.Param("run"), 10, 64)
	if err != nil || n < 1 {
		n = 0
	}
	r, err := d.svc.Run(c.Request.Context(), c.Param("app"), c.Param("name"), n)
	if err != nil {
		p := &page{Title: "Drill run", Nav: "switches"}
		d.h.fail(c, "message", p, "page", missing(err, "run "+c.Param("run")+" of drill "+c.Param("app")+"/"+c.Param("name")))
		return nil, false
	}
	return r, true
}

func (d drillPages) runPage(c *gin.Context) { d.renderRun(c, http.StatusOK, "", nil) }

// renderRun shows a run's report; form and ferr describe a failed form.
func (d drillPages) renderRun(c *gin.Context, status int, form string, ferr error) {
	r, ok := d.run(c)
	if !ok {
		return
	}
	v := r.ViewFor(actor(c).CanWrite(r.App))
	p := &page{Title: "Drill " + r.App + "/" + r.Drill + " #" + strconv.FormatInt(r.Number, 10), Nav: "switches",
		Data: map[string]any{"R": v, "Switch": switchURL(r.App, r.SwitchName), "Self": runURL(r.App, r.Drill, r.Number)}}
	if ferr != nil {
		d.h.fail(c, "drillrun", p, form, ferr)
		return
	}
	d.h.render(c, status, "drillrun", p)
}

// start asks for a run now (or a dry run) from the switch page.
func (d drillPages) start(c *gin.Context) {
	app, name := c.Param("app"), c.Param("name")
	fp := &formParser{c: c}
	in := drill.RunInput{Reason: fp.str("reason"), DryRun: fp.str("dry_run") == "yes"}
	r, err := d.svc.Start(c.Request.Context(), actor(c), app, name, in)
	if err != nil {
		dr, gerr := d.svc.Get(c.Request.Context(), app, name)
		if gerr != nil {
			d.h.fail(c, "message", &page{Title: "Drill"}, "page", missing(gerr, "drill "+app+"/"+name))
			return
		}
		// The form is on the switch's page: show it again there.
		for i := range c.Params {
			if c.Params[i].Key == "name" {
				c.Params[i].Value = dr.SwitchName
			}
		}
		d.h.switchPage(c, 0, "drill:"+name, err)
		return
	}
	what := "Run"
	if in.DryRun {
		what = "Dry run"
	}
	redirect(c, runURL(app, name, r.Number), what+" #"+strconv.FormatInt(r.Number, 10)+" asked for; the leader starts it within a second.")
}

// abort ends a run from its page.
func (d drillPages) abort(c *gin.Context) {
	r, ok := d.run(c)
	if !ok {
		return
	}
	fp := &formParser{c: c}
	_, err := d.svc.Abort(c.Request.Context(), actor(c), r.App, r.Drill, r.Number, drill.AbortInput{Reason: fp.str("reason")})
	if err != nil {
		d.renderRun(c, 0, "abort", err)
		return
	}
	redirect(c, runURL(r.App, r.Drill, r.Number), "Abort recorded; the override is removed at the leader's next step.")
}

// download serves a run's report as a Markdown summary or JSON.
func (d drillPages) download(markdown bool) gin.HandlerFunc {
	return func(c *gin.Context) {
		r, ok := d.run(c)
		if !ok {
			return
		}
		name, ctype, body, err := r.ReportFile(markdown, actor(c).CanWrite(r.App))
		if err != nil {
			d.h.log.Error("webui: drill report", "path", c.Request.URL.Path, "err", err)
			d.h.message(c, http.StatusInternalServerError, "Report unavailable", "The report could not be written; the console's log says why.")
			return
		}
		c.Header("Content-Disposition", `attachment; filename="`+name+`"`)
		c.Data(http.StatusOK, ctype, body)
	}
}
