package api

import (
	"github.com/gin-gonic/gin"

	"github.com/switchyard-io/switchyard/server/finding"
)

// Findings: GET /api/v1/findings?kind=&app=&target=&state=open|resolved|all,
// paged, newest first, with the open findings the same filters select
// counted by severity.

type findingHandler struct{ svc *finding.Service }

func registerFindings(v1 *gin.RouterGroup, svc *finding.Service) {
	v1.GET("/findings", findingHandler{svc}.list)
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
