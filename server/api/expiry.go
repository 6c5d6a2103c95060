package api

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/expiry"
	"github.com/switchyard-io/switchyard/server/finding"
)

// Expiry and findings: renewing a switch that is on, and the findings
// (GET /api/v1/findings?kind=&app=&target=&state=open|resolved|all&limit=).

type expiryHandler struct{ svc *expiry.Service }

func registerExpiry(apps, v1 *gin.RouterGroup, svc *expiry.Service) {
	h := expiryHandler{svc}
	apps.POST("/switches/:name/renew", h.renew)
	v1.GET("/findings", h.findings)
}

// renew extends a switch that is on by its max_on; body (or query):
// reason, optional version.
func (h expiryHandler) renew(c *gin.Context) {
	ch, ok := bindChange(c)
	if !ok {
		return
	}
	sw, rc, err := h.svc.Renew(c.Request.Context(), actor(c), c.Param("app"), c.Param("name"), ch)
	if err != nil {
		fail(c, err)
		return
	}
	changed(c, http.StatusOK, "switch", sw.View(), rc)
}

// findings lists findings, open ones unless state says otherwise, with the
// open counts by severity.
func (h expiryHandler) findings(c *gin.Context) {
	f, v := finding.ParseFilter(c.Query("kind"), c.Query("app"), c.Query("state"))
	f.Target, f.Limit = c.Query("target"), int(queryInt(c, "limit", 1000, &v))
	if len(v) > 0 {
		fail(c, &server.ValidationError{Fields: v})
		return
	}
	list, err := h.svc.Findings(c.Request.Context(), f)
	if err != nil {
		fail(c, err)
		return
	}
	counts, err := h.svc.OpenCounts(c.Request.Context())
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"findings": list, "open": counts})
}
