package webui

import (
	"context"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"gorm.io/gorm"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/sdk/wire"
	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/fleet"
)

// instances lists the live SDK instances of an app (or of every app) with
// their signals, and the app's switches that are on.
func (h *handler) instances(c *gin.Context) {
	app := c.Param("app")
	if app == "" {
		app = c.Query("app")
	}
	f := h.fleetView(c)
	apps := h.fleet.Apps()
	if app != "" {
		apps = []string{app}
	}
	type group struct {
		App       string
		Instances []fleet.InstanceView
		Stale     int
		Switches  []SwitchRow
	}
	var groups []group
	for _, a := range apps {
		g := group{App: a, Instances: h.fleet.Instances(a)}
		for _, in := range g.Instances {
			if in.Stale {
				g.Stale++
			}
		}
		list, _ := h.svc.ListSwitches(c.Request.Context(), a)
		list = slices.DeleteFunc(list, func(s server.Switch) bool { return s.State != wire.StateOn })
		g.Switches = switchRows(list, f, false)
		groups = append(groups, g)
	}
	h.render(c, http.StatusOK, "instances", &page{Title: "Instances", Nav: "instances", Fleet: true, Data: map[string]any{"Groups": groups, "App": app, "Fleet": f}})
}

// instance shows one live SDK instance: what it applied and, per switch
// and limit rule, what it reports.
func (h *handler) instance(c *gin.Context) {
	app, id := c.Param("app"), c.Param("id")
	f := h.fleetView(c)
	in, ok := h.fleet.Instance(app, id)
	if !ok {
		h.message(c, http.StatusNotFound, "No such instance", "There is no live instance "+app+"/"+id+": it never registered, or it stopped (its key ends with its lease).")
		return
	}
	h.render(c, http.StatusOK, "instance", &page{Title: "Instance " + app + "/" + id, Nav: "instances", Fleet: true, Data: map[string]any{"I": in, "Fleet": f}})
}

// auditQuery reads the audit filters; times are datetime-local values in
// UTC or RFC 3339. An "until" given to the minute (what the browser's
// picker sends) or to the day includes that whole minute or day.
func auditQuery(c *gin.Context) (audit.Filter, map[string]string) {
	f := audit.Filter{Target: strings.TrimSpace(c.Query("target")), Actor: strings.TrimSpace(c.Query("actor")), Action: audit.Action(strings.TrimSpace(c.Query("action"))), Limit: 50}
	errs := map[string]string{}
	parse := func(name string, dst *time.Time) {
		s := strings.TrimSpace(c.Query(name))
		if s == "" {
			return
		}
		for _, l := range []struct {
			layout string
			span   time.Duration // what the value stands for beyond its instant
		}{{time.RFC3339, 0}, {"2006-01-02T15:04:05", time.Second}, {"2006-01-02T15:04", time.Minute}, {"2006-01-02", 24 * time.Hour}} {
			if t, err := time.ParseInLocation(l.layout, s, time.UTC); err == nil {
				if name == "until" {
					t = t.Add(l.span) // audit.Filter.Until is exclusive
				}
				*dst = t
				return
			}
		}
		errs[name] = "must be a time such as 2026-01-02T15:04 (UTC)"
	}
	parse("since", &f.Since)
	parse("until", &f.Until)
	if b := c.Query("before"); b != "" {
		n, err := strconv.ParseInt(b, 10, 64)
		if err != nil || n < 1 {
			errs["before"] = "must be a positive event id"
		}
		f.BeforeID = n
	}
	return f, errs
}

func (h *handler) auditPage(c *gin.Context) {
	f, errs := auditQuery(c)
	p := &page{Title: "Audit log", Nav: "audit", Form: "filter", Errors: errs}
	if len(errs) > 0 {
		p.Error = "Fix the filters marked below."
		f = audit.Filter{Limit: 50}
	}
	events, next, err := h.svc.ListAudit(c.Request.Context(), f)
	if err != nil {
		h.fail(c, "audit", p, "page", err)
		return
	}
	res, verr := h.verify.get(c.Request.Context(), h.svc.DB())
	q := c.Request.URL.Query()
	q.Del("before")
	p.Data = map[string]any{
		"Events": eventRows(events), "Next": next, "Verify": res, "VerifyErr": verr,
		"Q": q, "Filter": template.URL(q.Encode()),
	}
	status := http.StatusOK
	if len(errs) > 0 {
		status = http.StatusBadRequest
	}
	h.render(c, status, "audit", p)
}

// auditExport downloads the filtered log as JSON lines or CSV.
func (h *handler) auditExport(c *gin.Context) {
	f, errs := auditQuery(c)
	format := c.Query("format")
	if format != audit.FormatJSONL && format != audit.FormatCSV {
		errs["format"] = "must be jsonl or csv"
	}
	if len(errs) > 0 {
		c.String(http.StatusBadRequest, "invalid export request: %v", errs)
		return
	}
	f.BeforeID, f.Limit = 0, 0
	ctype := "application/x-ndjson"
	if format == audit.FormatCSV {
		ctype = "text/csv; charset=utf-8"
	}
	c.Header("Content-Type", ctype)
	c.Header("Content-Disposition", fmt.Sprintf(`attachment; filename="switchyard-audit-%s.%s"`, time.Now().UTC().Format("20060102-150405"), format))
	c.Status(http.StatusOK)
	if err := h.svc.ExportAudit(c.Request.Context(), c.Writer, format, f); err != nil {
		h.log.Error("webui: audit export", "err", err)
	}
}

// verifyCache keeps the last chain verification for a few seconds while the
// head has not moved, so live refreshes of the audit page do not re-hash
// the whole log each time.
type verifyCache struct {
	mu   sync.Mutex
	head int64
	at   time.Time
	res  audit.Result
}

const verifyTTL = 10 * time.Second

func (v *verifyCache) get(ctx context.Context, db *gorm.DB) (audit.Result, error) {
	head, err := audit.Head(ctx, db)
	if err != nil {
		return audit.Result{}, err
	}
	var id int64
	if head != nil {
		id = head.ID
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if id == v.head && time.Since(v.at) < verifyTTL && !v.at.IsZero() {
		return v.res, nil
	}
	res, err := audit.Verify(ctx, db)
	if err != nil {
		return res, err
	}
	v.head, v.at, v.res = id, time.Now(), res
	return res, nil
}
