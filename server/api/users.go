package api

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/switchyard-io/switchyard/server"
)

// Users of the web console, for automation: admins only, the same
// validation and audit as the web UI's admin page.

func (h *handler) listUsers(c *gin.Context) {
	if !requireAdmin(c) {
		return
	}
	listPage(c, "users", func(pg server.Page) ([]server.User, string, error) {
		return h.svc.ListUsers(c.Request.Context(), pg)
	}, (*server.User).View)
}

func (h *handler) getUser(c *gin.Context) {
	if !requireAdmin(c) {
		return
	}
	u, err := h.svc.UserByName(c.Request.Context(), c.Param("username"))
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"user": u.View()})
}

func (h *handler) createUser(c *gin.Context) {
	var in server.UserInput
	if !bindAll(c, &in) {
		return
	}
	u, err := h.svc.CreateUser(c.Request.Context(), actor(c), in)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, gin.H{"user": u.View()})
}

func (h *handler) patchUser(c *gin.Context) {
	var p server.UserPatch
	if !bindAll(c, &p) {
		return
	}
	u, err := h.svc.UpdateUser(c.Request.Context(), actor(c), c.Param("username"), p)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"user": u.View()})
}

// requireAdmin answers 403 to everyone but admins.
func requireAdmin(c *gin.Context) bool {
	if actor(c).Role != server.RoleAdmin {
		fail(c, server.ErrForbidden)
		return false
	}
	return true
}
