package api

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/switchyard-io/switchyard/server/expiry"
)

// Expiry: renewing a switch that is on.

type expiryHandler struct{ svc *expiry.Service }

func registerExpiry(apps *gin.RouterGroup, svc *expiry.Service) {
	h := expiryHandler{svc}
	apps.POST("/switches/:name/renew", h.renew)
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
