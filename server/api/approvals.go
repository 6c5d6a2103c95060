package api

import (
	"context"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/approval"
)

// Approvals: each app's approval policy (admins set it), the change
// requests a held change becomes, their decisions and applies, and the
// review of a break-glass. A change the policy holds answers 202 with the
// request it became; ?break_glass=true on a change applies it at once
// (marked, announced, reviewed).

func registerApprovals(apps, v1 *gin.RouterGroup, h *handler) {
	apps.GET("/policy", h.getPolicy)
	apps.PUT("/policy", h.setPolicy)
	v1.GET("/requests", h.listRequests)
	v1.GET("/requests/:id", h.getRequest)
	v1.PATCH("/requests/:id", h.editRequest)
	v1.POST("/requests/:id/approve", h.decideRequest(h.svc.ApproveRequest))
	v1.POST("/requests/:id/deny", h.decideRequest(h.svc.DenyRequest))
	v1.POST("/requests/:id/apply", h.applyRequest)
}

// ReviewRoutes close the review a break-glass opened (POST
// /findings/{id}/review with a note).
func ReviewRoutes(reviews *approval.Service) Routes {
	return func(_, v1 *gin.RouterGroup) {
		v1.POST("/findings/:id/review", func(c *gin.Context) {
			id, ok := pathID(c)
			var r approval.Review
			if !ok || !bind(c, &r) {
				return
			}
			if err := reviews.CloseReview(c.Request.Context(), actor(c), id, r); err != nil {
				fail(c, err)
				return
			}
			c.JSON(http.StatusOK, gin.H{"finding": id, "reviewed": true})
		})
	}
}

// breakGlass marks a change sent with ?break_glass=true (server.WithBreakGlass).
func breakGlass(c *gin.Context) {
	if c.Query("break_glass") == "true" {
		c.Request = c.Request.WithContext(server.WithBreakGlass(c.Request.Context()))
	}
	c.Next()
}

// heldAnswer is the 202 of a change that became a change request.
func heldAnswer(held *server.ApprovalRequired) gin.H {
	return gin.H{
		"approval_required": gin.H{"rule": held.Decision.Rule, "approvals": held.Decision.Approvals, "why": held.Decision.Why},
		"change_request":    held.Request,
	}
}

func pathID(c *gin.Context) (int64, bool) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id < 1 {
		fail(c, &server.ValidationError{Fields: []*server.FieldError{{Field: "id", Msg: "must be a positive integer"}}})
		return 0, false
	}
	return id, true
}

func (h *handler) getPolicy(c *gin.Context) {
	p, err := h.svc.GetPolicy(c.Request.Context(), c.Param("app"))
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"policy": p.View()})
}

func (h *handler) setPolicy(c *gin.Context) {
	var in server.PolicyInput
	if !bindAll(c, &in) {
		return
	}
	p, err := h.svc.SetPolicy(c.Request.Context(), actor(c), c.Param("app"), in)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"policy": p.View()})
}

func (h *handler) listRequests(c *gin.Context) {
	f := server.RequestFilter{App: c.Query("app"), Name: c.Query("name"), State: c.Query("state"), Open: c.Query("open") == "true"}
	listPage(c, "requests", func(pg server.Page) ([]server.ChangeRequest, string, error) {
		return h.svc.ListRequests(c.Request.Context(), f, pg)
	}, func(r *server.ChangeRequest) *server.ChangeRequest { return r })
}

func (h *handler) getRequest(c *gin.Context) {
	id, ok := pathID(c)
	if !ok {
		return
	}
	r, err := h.svc.GetRequest(c.Request.Context(), id)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"request": r})
}

func (h *handler) editRequest(c *gin.Context) {
	id, ok := pathID(c)
	var e server.RequestEdit
	if !ok || !bind(c, &e) {
		return
	}
	r, err := h.svc.UpdateRequest(c.Request.Context(), actor(c), id, e)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"request": r})
}

func (h *handler) decideRequest(decide func(ctx context.Context, a server.Actor, id int64, d server.Decision) (*server.RequestView, error)) gin.HandlerFunc {
	return func(c *gin.Context) {
		id, ok := pathID(c)
		var d server.Decision
		if !ok || !bind(c, &d) {
			return
		}
		r, err := decide(c.Request.Context(), actor(c), id, d)
		if err != nil {
			fail(c, err)
			return
		}
		c.JSON(http.StatusOK, gin.H{"request": r})
	}
}

// applyBody applies a request; break_glass applies a pending one at once.
type applyBody struct {
	BreakGlass bool   `json:"break_glass"`
	Reason     string `json:"reason"`
}

func (h *handler) applyRequest(c *gin.Context) {
	id, ok := pathID(c)
	var b applyBody
	if !ok {
		return
	}
	if c.Request.ContentLength != 0 && !bind(c, &b) {
		return
	}
	r, rc, err := h.svc.ApplyRequest(c.Request.Context(), actor(c), id, b.BreakGlass, b.Reason)
	if err != nil {
		fail(c, err)
		return
	}
	changed(c, http.StatusOK, "request", r, rc)
}
