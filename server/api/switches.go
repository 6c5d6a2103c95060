package api

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/switchyard-io/switchyard/server"
)

func (h *handler) listSwitches(c *gin.Context) {
	listPage(c, "switches", func(pg server.Page) ([]server.Switch, string, error) {
		return h.svc.SwitchPage(c.Request.Context(), c.Param("app"), pg)
	}, (*server.Switch).View)
}

func (h *handler) listAllSwitches(c *gin.Context) {
	listPage(c, "switches", func(pg server.Page) ([]server.Switch, string, error) {
		return h.svc.SwitchPage(c.Request.Context(), "", pg)
	}, (*server.Switch).View)
}

func (h *handler) createSwitch(c *gin.Context) {
	var in server.SwitchInput
	if !bindAll(c, &in) {
		return
	}
	sw, rc, err := h.svc.CreateSwitch(c.Request.Context(), actor(c), c.Param("app"), in)
	if err != nil {
		fail(c, err)
		return
	}
	changed(c, http.StatusCreated, "switch", sw.View(), rc)
}

func (h *handler) getSwitch(c *gin.Context) {
	sw, err := h.svc.GetSwitch(c.Request.Context(), c.Param("app"), c.Param("name"))
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"switch": sw.View()})
}

func (h *handler) patchSwitch(c *gin.Context) {
	var p server.SwitchPatch
	if !bindAll(c, &p) {
		return
	}
	sw, rc, err := h.svc.PatchSwitch(c.Request.Context(), actor(c), c.Param("app"), c.Param("name"), p)
	if err != nil {
		fail(c, err)
		return
	}
	changed(c, http.StatusOK, "switch", sw.View(), rc)
}

func (h *handler) toggleSwitch(on bool) gin.HandlerFunc {
	return func(c *gin.Context) {
		var t server.Toggle
		if !bind(c, &t) {
			return
		}
		turn := h.svc.TurnOff
		if on {
			turn = h.svc.TurnOn
		}
		sw, rc, err := turn(c.Request.Context(), actor(c), c.Param("app"), c.Param("name"), t)
		if err != nil {
			fail(c, err)
			return
		}
		changed(c, http.StatusOK, "switch", sw.View(), rc)
	}
}

func (h *handler) deleteSwitch(c *gin.Context) {
	ch, ok := bindChange(c)
	if !ok {
		return
	}
	rc, err := h.svc.DeleteSwitch(c.Request.Context(), actor(c), c.Param("app"), c.Param("name"), ch)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"deleted": true, "published": rc.Published, "revision": rc.Revision})
}
