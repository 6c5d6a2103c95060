package webui

import (
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/expiry"
	"github.com/switchyard-io/switchyard/server/finding"
)

// Expiry and findings: the switch page's expiry banner and renew form
// (section "expiry"), the Overview's findings banner (section
// "findings"), the Findings page and the open-findings count in the
// navigation bar.

// FindingCounts are the open findings by severity, for the navigation bar.
type FindingCounts struct {
	Critical, Warning, Info, Total int64
}

func (h *handler) registerExpiry(in *gin.RouterGroup, svc *expiry.Service) {
	in.GET("/findings", func(c *gin.Context) { h.findingsPage(c, svc) })
	in.POST("/apps/:app/switches/:name/renew", func(c *gin.Context) { h.renew(c, svc) })
	h.onSwitch["expiry"] = func(c *gin.Context, sw *server.Switch) (any, error) {
		return svc.StatusOf(c.Request.Context(), sw)
	}
	h.onOverview["findings"] = func(c *gin.Context) (any, error) {
		expired, err := svc.Expired(c.Request.Context())
		if err != nil {
			return nil, err
		}
		return map[string]any{"Expired": expired}, nil
	}
	h.findingCounts = func(c *gin.Context) *FindingCounts {
		m, err := svc.Findings().OpenCounts(c.Request.Context(), finding.Filter{})
		if err != nil {
			return nil // the bar goes without its count; the page says why if it needs the database
		}
		return &FindingCounts{Critical: m[finding.Critical], Warning: m[finding.Warning], Info: m[finding.Info],
			Total: m[finding.Critical] + m[finding.Warning] + m[finding.Info]}
	}
}

// findingsPage lists findings with filters kind, app and state
// (open, resolved, all).
func (h *handler) findingsPage(c *gin.Context, svc *expiry.Service) {
	q := map[string]string{"kind": strings.TrimSpace(c.Query("kind")), "app": strings.TrimSpace(c.Query("app")), "state": c.DefaultQuery("state", "open")}
	p := &page{Title: "Findings", Nav: "findings", Form: "filter", Errors: map[string]string{}}
	f, bad := finding.ParseFilter(q["kind"], q["app"], q["state"])
	for _, fe := range bad {
		p.Errors[fe.Field] = fe.Msg
	}
	status := http.StatusOK
	if len(p.Errors) > 0 {
		p.Error, status = "Fix the filters marked below.", http.StatusBadRequest
		f = finding.Filter{Open: true}
	}
	list, _, err := svc.Findings().List(c.Request.Context(), f, server.Page{Limit: 200})
	if err != nil {
		h.fail(c, "findings", p, "page", err)
		return
	}
	p.Data = map[string]any{"Findings": list, "Q": q, "Kinds": finding.Kinds}
	h.render(c, status, "findings", p)
}

// renew confirms a switch that is on from its page: it stays on for
// another max_on.
func (h *handler) renew(c *gin.Context, svc *expiry.Service) {
	app, name := c.Param("app"), c.Param("name")
	fp := &formParser{c: c}
	ch := server.Change{Reason: fp.str("reason"), Version: fp.int64Ptr("version")}
	if err := fp.err(); err != nil {
		h.switchPage(c, 0, "renew", err)
		return
	}
	sw, rc, err := svc.Renew(c.Request.Context(), actor(c), app, name, ch)
	if err != nil {
		h.switchPage(c, 0, "renew", err)
		return
	}
	redirect(c, h.back(c, switchURL(app, name)), "Renewed "+app+"/"+name+": it stays on until "+sw.ExpiresAt.UTC().Format(stampLayout)+"."+receiptNote(rc))
}
