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
	f, bad := auditFilter(c)
	pg, ok := readPage(c, bad)
	if !ok {
		return
	}
	before, err := pg.AfterID()
	if err != nil {
		fail(c, err)
		return
	}
	f.BeforeID, f.Limit = before, pg.Limit
	events, next, err := h.svc.ListAudit(c.Request.Context(), f)
	if err != nil {
		fail(c, err)
		return
	}
	cursor := ""
	if next > 0 {
		cursor = server.IDKey(next)
	}
	answerPage(c, gin.H{"events": views(events, viewEvent)}, cursor)
}

// auditFilter parses the audit query's filters: target, actor, action,
// since and until (RFC 3339), naming each bad one.
func auditFilter(c *gin.Context) (audit.Filter, []*server.FieldError) {
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
	return f, v
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

// latestCheckpoint serves the newest signed checkpoint as the note itself
// (text/plain), what witnesses verify; 404 before the first.
func (h *handler) latestCheckpoint(c *gin.Context) {
	cp, err := h.svc.LatestCheckpoint(c.Request.Context())
	if err != nil {
		fail(c, err)
		return
	}
	c.Data(http.StatusOK, "text/plain; charset=utf-8", []byte(cp.Note))
}

// listCheckpoints lists the signed checkpoints with the verifier key that
// signed each, oldest first, a page at a time: what an offline verifier
// needs besides the exported events.
func (h *handler) listCheckpoints(c *gin.Context) {
	listPage(c, "checkpoints", func(pg server.Page) ([]audit.StoredCheckpoint, string, error) {
		return h.svc.AuditCheckpoints(c.Request.Context(), pg)
	}, same)
}

// inclusionProof proves event id is in the tree of size (default: the
// latest checkpoint's).
func (h *handler) inclusionProof(c *gin.Context) {
	var v []*server.FieldError
	id := queryInt(c, "id", 1<<62, &v)
	size := queryInt(c, "size", 1<<62, &v)
	if id == 0 && len(v) == 0 {
		v = append(v, &server.FieldError{Field: "id", Msg: "is required: the event to prove"})
	}
	if len(v) > 0 {
		fail(c, &server.ValidationError{Fields: v})
		return
	}
	p, err := h.svc.ProveInclusion(c.Request.Context(), id, size)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, p)
}

// consistencyProof proves the tree of size to (default: the whole log)
// extends the tree of size from.
func (h *handler) consistencyProof(c *gin.Context) {
	var v []*server.FieldError
	from := queryInt(c, "from", 1<<62, &v)
	to := queryInt(c, "to", 1<<62, &v)
	if from == 0 && len(v) == 0 {
		v = append(v, &server.FieldError{Field: "from", Msg: "is required: the size of the older tree"})
	}
	if len(v) > 0 {
		fail(c, &server.ValidationError{Fields: v})
		return
	}
	p, err := h.svc.ProveConsistency(c.Request.Context(), from, to)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, p)
}
