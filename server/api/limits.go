package api

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/switchyard-io/switchyard/server"
)

func (h *handler) listLimits(c *gin.Context) {
	listPage(c, "limits", func(pg server.Page) ([]server.LimitRule, string, error) {
		return h.svc.LimitPage(c.Request.Context(), c.Param("app"), pg)
	}, (*server.LimitRule).View)
}

func (h *handler) createLimit(c *gin.Context) {
	var in server.LimitInput
	if !bindAll(c, &in) {
		return
	}
	r, rc, err := h.svc.CreateLimit(c.Request.Context(), actor(c), c.Param("app"), in)
	if err != nil {
		fail(c, err)
		return
	}
	changed(c, http.StatusCreated, "limit", r.View(), rc)
}

func (h *handler) getLimit(c *gin.Context) {
	r, err := h.svc.GetLimit(c.Request.Context(), c.Param("app"), c.Param("resource"))
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"limit": r.View()})
}

func (h *handler) patchLimit(c *gin.Context) {
	var p server.LimitPatch
	if !bind(c, &p) {
		return
	}
	r, rc, err := h.svc.PatchLimit(c.Request.Context(), actor(c), c.Param("app"), c.Param("resource"), p)
	if err != nil {
		fail(c, err)
		return
	}
	changed(c, http.StatusOK, "limit", r.View(), rc)
}

func (h *handler) toggleLimit(state string) gin.HandlerFunc {
	return func(c *gin.Context) {
		var t server.Toggle
		if !bind(c, &t) {
			return
		}
		r, rc, err := h.svc.SetLimitState(c.Request.Context(), actor(c), c.Param("app"), c.Param("resource"), state, t)
		if err != nil {
			fail(c, err)
			return
		}
		changed(c, http.StatusOK, "limit", r.View(), rc)
	}
}

func (h *handler) deleteLimit(c *gin.Context) {
	ch, ok := bindChange(c)
	if !ok {
		return
	}
	rc, err := h.svc.DeleteLimit(c.Request.Context(), actor(c), c.Param("app"), c.Param("resource"), ch)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"deleted": true, "published": rc.Published, "revision": rc.Revision})
}
