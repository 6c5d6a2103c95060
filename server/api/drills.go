package api

import (
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/drill"
)

// drills serves /apps/:app/drills and the runs of each drill.
type drills struct{ svc *drill.Service }

func (d drills) register(apps *gin.RouterGroup) {
	apps.GET("/drills", d.list)
	apps.POST("/drills", d.create)
	apps.GET("/drills/:name", d.get)
	apps.PATCH("/drills/:name", d.update)
	apps.DELETE("/drills/:name", d.remove)
	apps.GET("/drills/:name/runs", d.runs)
	apps.POST("/drills/:name/runs", d.start)
	apps.GET("/drills/:name/runs/:run", d.run)
	apps.GET("/drills/:name/runs/:run/report.json", d.report(false))
	apps.GET("/drills/:name/runs/:run/report.md", d.report(true))
	apps.POST("/drills/:name/runs/:run/abort", d.abort)
}

// mayChange reports whether the caller may change the app the path names:
// only they see probe query strings and answer excerpts.
func mayChange(c *gin.Context) bool { return actor(c).CanWrite(c.Param("app")) }

func (d drills) list(c *gin.Context) {
	now, may := d.svc.Now(), mayChange(c)
	listPage(c, "drills", func(pg server.Page) ([]drill.Drill, string, error) {
		return d.svc.List(c.Request.Context(), c.Param("app"), pg)
	}, func(dr *drill.Drill) drill.DrillView { return dr.ViewFor(now, may) })
}

func (d drills) create(c *gin.Context) {
	var in drill.Input
	if !bindAll(c, &in) {
		return
	}
	dr, err := d.svc.Create(c.Request.Context(), actor(c), c.Param("app"), in)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, gin.H{"drill": dr.ViewFor(d.svc.Now(), mayChange(c))})
}

func (d drills) get(c *gin.Context) {
	dr, err := d.svc.Get(c.Request.Context(), c.Param("app"), c.Param("name"))
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"drill": dr.ViewFor(d.svc.Now(), mayChange(c))})
}

func (d drills) update(c *gin.Context) {
	var p server.Patch
	if !bind(c, &p) {
		return
	}
	dr, err := d.svc.Update(c.Request.Context(), actor(c), c.Param("app"), c.Param("name"), p)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"drill": dr.ViewFor(d.svc.Now(), mayChange(c))})
}

func (d drills) remove(c *gin.Context) {
	ch, ok := bindChange(c)
	if !ok {
		return
	}
	if err := d.svc.Delete(c.Request.Context(), actor(c), c.Param("app"), c.Param("name"), ch); err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"deleted": true})
}

func (d drills) runs(c *gin.Context) {
	may := mayChange(c)
	listPage(c, "runs", func(pg server.Page) ([]drill.Run, string, error) {
		return d.svc.Runs(c.Request.Context(), c.Param("app"), c.Param("name"), pg)
	}, func(r *drill.Run) drill.RunView { return r.ViewFor(may) })
}

func (d drills) start(c *gin.Context) {
	var in drill.RunInput
	if !bind(c, &in) {
		return
	}
	r, err := d.svc.Start(c.Request.Context(), actor(c), c.Param("app"), c.Param("name"), in)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusAccepted, gin.H{"run": r.ViewFor(mayChange(c))})
}

// runNumber parses :run; false when it answered the problem.
func runNumber(c *gin.Context) (int64, bool) {
	n, err := strconv.ParseInt(c.Param("run"), 10, 64)
	if err != nil || n < 1 {
		fail(c, &server.ValidationError{Fields: []*server.FieldError{{Field: "run", Msg: "must be a run number (1, 2, …)"}}})
		return 0, false
	}
	return n, true
}

// loadRun reads the run the path names, answering the problem if it cannot.
func (d drills) loadRun(c *gin.Context) (*drill.Run, bool) {
	n, ok := runNumber(c)
	if !ok {
		return nil, false
	}
	r, err := d.svc.Run(c.Request.Context(), c.Param("app"), c.Param("name"), n)
	if err != nil {
		fail(c, err)
		return nil, false
	}
	return r, true
}

func (d drills) run(c *gin.Context) {
	if r, ok := d.loadRun(c); ok {
		c.JSON(http.StatusOK, gin.H{"run": r.ViewFor(mayChange(c))})
	}
}

// report downloads a run's report as JSON or as a Markdown summary.
func (d drills) report(markdown bool) gin.HandlerFunc {
	return func(c *gin.Context) {
		r, ok := d.loadRun(c)
		if !ok {
			return
		}
		name, ctype, body, err := r.ReportFile(markdown, mayChange(c))
		if err != nil {
			fail(c, err)
			return
		}
		c.Header("Content-Disposition", `attachment; filename="`+name+`"`)
		c.Data(http.StatusOK, ctype, body)
	}
}

func (d drills) abort(c *gin.Context) {
	n, ok := runNumber(c)
	if !ok {
		return
	}
	var in drill.AbortInput
	if !bind(c, &in) {
		return
	}
	r, err := d.svc.Abort(c.Request.Context(), actor(c), c.Param("app"), c.Param("name"), n, in)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"run": r.ViewFor(mayChange(c))})
}
