package api

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/server"
)

// eventView is an audit event in the API: before and after are the
// recorded documents themselves, not strings holding JSON. (Exports keep
// the stored strings: they are what the hash chain covers.)
type eventView struct {
	audit.Event
	Before json.RawMessage `json:"before,omitempty"`
	After  json.RawMessage `json:"after,omitempty"`
}

func viewEvent(e *audit.Event) eventView {
	return eventView{Event: *e, Before: rawJSON(e.Before), After: rawJSON(e.After)}
}

// rawJSON is s as a JSON value: itself when it is JSON (entities, etcd
// values), else a JSON string (a hand-edited etcd value that is not JSON).
func rawJSON(s string) json.RawMessage {
	switch {
	case s == "":
		return nil
	case json.Valid([]byte(s)):
		return json.RawMessage(s)
	}
	b, _ := json.Marshal(s)
	return b
}

func (h *handler) listAudit(c *gin.Context) {
	f, err := auditFilter(c)
	if err != nil {
		fail(c, err)
		return
	}
	events, next, err := h.svc.ListAudit(c.Request.Context(), f)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"events": views(events, viewEvent), "next_before": next})
}

// auditFilter parses the audit query: target, actor, action, since, until
// (RFC 3339), limit and before (paging cursor).
func auditFilter(c *gin.Context) (audit.Filter, error) {
	f := audit.Filter{Target: c.Query("target"), Actor: c.Query("actor"), Action: audit.Action(c.Query("action"))}
	var v []*server.FieldError
	parseTime := func(name string, dst *time.Time) {
		if s := c.Query(name); s != "" {
			t, err := time.Parse(time.RFC3339, s)
			if err != nil {
				v = append(v, &server.FieldError{Field: name, Msg: "must be an RFC 3339 time such as 2026-01-02T15:04:05Z"})
			}
			*dst = t
		}
	}
	parseTime("since", &f.Since)
	parseTime("until", &f.Until)
	f.Limit = int(queryInt(c, "limit", 1000, &v))
	f.BeforeID = queryInt(c, "before", 1<<62, &v)
	if len(v) > 0 {
		return f, &server.ValidationError{Fields: v}
	}
	return f, nil
}

func (h *handler) verifyAudit(c *gin.Context) {
	res, err := h.svc.VerifyAudit(c.Request.Context())
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"ok": res.OK(), "events": res.Events, "head_hash": res.HeadHash, "mismatch": res.Mismatch,
		"tree_root": res.TreeRoot, "checkpoints": res.Checkpoints, "tree_mismatch": res.TreeMismatch})
}
