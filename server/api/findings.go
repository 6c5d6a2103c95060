package api

import (
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/finding"
)

// Findings: GET /api/v1/findings?kind=&app=&target=&state=open|resolved|all,
// paged, newest first, with the open findings the same filters select
// counted by severity; POST /api/v1/findings/{id}/ack acknowledges one
// (reason, optional version).

type findingHandler struct{ svc *finding.Service }

func registerFindings(v1 *gin.RouterGroup, svc *finding.Service) {
	h := findingHandler{svc}
	v1.GET("/findings", h.list)
	v1.POST("/findings/:id/ack", h.ack)
}

func (h findingHandler) ack(c *gin.Context) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id < 1 {
		fail(c, &server.ValidationError{Fields: []*server.FieldError{{Field: "id", Msg: "must be a finding id (a positive integer)"}}})
		return
	}
	var ch server.Change
	if !bind(c, &ch) {
		return
	}
	f, err := h.svc.Ack(c.Request.Context(), actor(c), id, ch)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"finding": f})
}

func (h findingHandler) list(c *gin.Context) {
	f, bad := finding.ParseFilter(c.Query("kind"), c.Query("app"), c.Query("state"))
	f.Target = c.Query("target")
	pg, ok := readPage(c, bad)
	if !ok {
		return
	}
	list, next, err := h.svc.List(c.Request.Context(), f, pg)
	if err != nil {
		fail(c, err)
		return
	}
	counts, err := h.svc.OpenCounts(c.Request.Context(), f)
	if err != nil {
		fail(c, err)
		return
	}
	answerPage(c, gin.H{"findings": list, "open": counts}, next)
}
