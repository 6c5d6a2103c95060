package webui

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/switchyard-io/switchyard/server"
)

// Change requests: the pending-requests page (and the navigation's
// badge), a request's page with its change, approvals and the approve,
// deny and apply forms (break-glass behind a confirmation with a reason),
// and the switch page's section naming its open requests. A change the
// approval policy holds lands on its request's page.

func (h *handler) registerRequests(in *gin.RouterGroup) {
	in.GET("/requests", h.requestList)
	in.GET("/requests/:id", h.requestPage)
	in.POST("/requests/:id/approve", h.decideForm("approve"))
	in.POST("/requests/:id/deny", h.decideForm("deny"))
	in.POST("/requests/:id/apply", h.applyForm)
	h.onSwitch["requests"] = func(c *gin.Context, sw *server.Switch) (any, error) {
		list, _, err := h.svc.ListRequests(c.Request.Context(), server.RequestFilter{App: sw.App, Name: sw.Name, Open: true}, server.Page{})
		if err != nil || len(list) == 0 {
			return nil, err
		}
		return list, nil
	}
	h.openRequests = func(c *gin.Context) int {
		list, _, err := h.svc.ListRequests(c.Request.Context(), server.RequestFilter{Open: true}, server.Page{})
		if err != nil {
			return 0
		}
		return len(list)
	}
}

func jsonOf(v any) string {
	if v == nil {
		return ""
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// held sends a change the policy held to its request's page and reports
// whether err was one.
func held(c *gin.Context, err error) bool {
	var ar *server.ApprovalRequired
	if !errors.As(err, &ar) || ar.Request == nil {
		return false
	}
	redirect(c, fmt.Sprintf("%s/requests/%d", Prefix, ar.Request.ID),
		fmt.Sprintf("Held for approval: %s. Request #%d waits for another person; it expires in an hour.", ar.Decision.Why, ar.Request.ID))
	return true
}

func (h *handler) requestList(c *gin.Context) {
	f := server.RequestFilter{App: c.Query("app"), Open: c.Query("state") != "all"}
	list, _, err := h.svc.ListRequests(c.Request.Context(), f, server.Page{Limit: 500})
	p := &page{Title: "Change requests", Nav: "requests", Data: map[string]any{"Requests": list, "All": !f.Open}}
	if err != nil {
		h.fail(c, "requests", p, "page", err)
		return
	}
	h.render(c, http.StatusOK, "requests", p)
}

func (h *handler) requestPage(c *gin.Context) { h.showRequest(c, http.StatusOK, "", nil) }

func (h *handler) showRequest(c *gin.Context, status int, form string, ferr error) {
	id, _ := strconv.ParseInt(c.Param("id"), 10, 64)
	p := &page{Title: fmt.Sprintf("Change request #%d", id), Nav: "requests"}
	r, err := h.svc.GetRequest(c.Request.Context(), id)
	if err != nil {
		p.Data = map[string]any{"Missing": true}
		h.fail(c, "request", p, "page", err)
		return
	}
	data := map[string]any{"R": r, "Mine": r.Author == actor(c).Name}
	var change bytes.Buffer
	if json.Indent(&change, r.Change, "", "  ") == nil {
		data["Change"] = change.String()
	}
	// What the request would change, field by field, against the target
	// as it is now.
	if before, after, err := h.svc.PreviewRequest(c.Request.Context(), &r.ChangeRequest); err == nil && before != nil {
		data["Diff"] = diff(jsonOf(before), jsonOf(after))
		data["Deletes"] = after == nil
	}
	p.Data = data
	if ferr != nil {
		h.fail(c, "request", p, form, ferr)
		return
	}
	h.render(c, status, "request", p)
}

func (h *handler) decideForm(verb string) gin.HandlerFunc {
	decide := h.svc.ApproveRequest
	if verb == "deny" {
		decide = h.svc.DenyRequest
	}
	return func(c *gin.Context) {
		id, _ := strconv.ParseInt(c.Param("id"), 10, 64)
		if _, err := decide(c.Request.Context(), actor(c), id, server.Decision{Reason: c.PostForm("reason")}); err != nil {
			h.showRequest(c, 0, verb, err)
			return
		}
		redirect(c, fmt.Sprintf("%s/requests/%d", Prefix, id), fmt.Sprintf("You %sd request #%d.", map[string]string{"approve": "approve", "deny": "denie"}[verb], id))
	}
}

// applyForm applies an approved request, or with break_glass=yes (after
// the page's confirmation) a pending one.
func (h *handler) applyForm(c *gin.Context) {
	id, _ := strconv.ParseInt(c.Param("id"), 10, 64)
	glass := c.PostForm("break_glass") == "yes"
	form := "apply"
	if glass {
		form = "glass"
	}
	_, rc, err := h.svc.ApplyRequest(c.Request.Context(), actor(c), id, glass, c.PostForm("reason"))
	if err != nil {
		h.showRequest(c, 0, form, err)
		return
	}
	msg := fmt.Sprintf("Request #%d applied.", id)
	if glass {
		msg = fmt.Sprintf("Break-glass: request #%d applied without approval; every channel was told and a review is open.", id)
	}
	redirect(c, fmt.Sprintf("%s/requests/%d", Prefix, id), msg+receiptNote(rc))
}
