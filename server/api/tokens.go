package api

import (
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/switchyard-io/switchyard/server"
)

func (h *handler) listTokens(c *gin.Context) {
	if !requireAdmin(c) {
		return
	}
	listPage(c, "tokens", func(pg server.Page) ([]server.Token, string, error) {
		return h.svc.ListTokens(c.Request.Context(), pg)
	}, (*server.Token).View)
}

func (h *handler) createToken(c *gin.Context) {
	var in server.TokenInput
	if !bindAll(c, &in) {
		return
	}
	secret, t, err := h.svc.CreateToken(c.Request.Context(), actor(c), in)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, gin.H{"token": secret, "info": t.View()})
}

func (h *handler) revokeToken(c *gin.Context) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil {
		fail(c, &server.ValidationError{Fields: []*server.FieldError{{Field: "id", Msg: "must be an integer"}}})
		return
	}
	ch, ok := bindChange(c)
	if !ok {
		return
	}
	if err := h.svc.RevokeToken(c.Request.Context(), actor(c), id, ch); err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"revoked": true})
}
