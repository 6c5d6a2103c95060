package api

import (
	"context"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/rollout"
)

// Staged rollouts under /api/v1/apps/:app/rollouts: start a plan, list
// and read plans (with their step history and live convergence), and
// pause, resume, abort or advance one. Every change is audited.

type rollouts struct{ s *rollout.Service }

func registerRollouts(apps *gin.RouterGroup, s *rollout.Service) {
	h := rollouts{s}
	apps.GET("/rollouts", h.list)
	apps.POST("/rollouts", h.create)
	apps.GET("/rollouts/:id", h.get)
	apps.POST("/rollouts/:id/pause", h.act(s.Pause))
	apps.POST("/rollouts/:id/resume", h.act(s.Resume))
	apps.POST("/rollouts/:id/abort", h.act(s.Abort))
	apps.POST("/rollouts/:id/advance", h.act(s.Advance))
}

func (h rollouts) create(c *gin.Context) {
	var in rollout.Input
	if !bindAll(c, &in) {
		return
	}
	v, err := h.s.Create(c.Request.Context(), actor(c), c.Param("app"), in)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, gin.H{"rollout": v})
}

// list answers the app's plans, newest first; ?switch= narrows to one
// switch, ?active=true to the plans still to finish.
func (h rollouts) list(c *gin.Context) {
	var fe []*server.FieldError
	f := rollout.Filter{Switch: c.Query("switch")}
	switch c.Query("active") {
	case "", "false":
	case "true":
		f.Active = true
	default:
		fe = append(fe, &server.FieldError{Field: "active", Msg: "must be true or false"})
	}
	var ok bool
	if f.Page, ok = readPage(c, fe); !ok {
		return
	}
	list, next, err := h.s.List(c.Request.Context(), c.Param("app"), f)
	if err != nil {
		fail(c, err)
		return
	}
	answerPage(c, gin.H{"rollouts": list}, next)
}

func (h rollouts) get(c *gin.Context) {
	id, ok := planID(c)
	if !ok {
		return
	}
	v, err := h.s.Get(c.Request.Context(), c.Param("app"), id)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"rollout": v})
}

type planAction func(ctx context.Context, a server.Actor, app string, id int64, in rollout.ActionInput) (*rollout.View, error)

func (h rollouts) act(do planAction) gin.HandlerFunc {
	return func(c *gin.Context) {
		id, ok := planID(c)
		if !ok {
			return
		}
		var in rollout.ActionInput
		if !bind(c, &in) {
			return
		}
		v, err := do(c.Request.Context(), actor(c), c.Param("app"), id, in)
		if err != nil {
			fail(c, err)
			return
		}
		c.JSON(http.StatusOK, gin.H{"rollout": v})
	}
}

// planID reads the :id path parameter.
func planID(c *gin.Context) (int64, bool) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id < 1 {
		fail(c, &server.ValidationError{Fields: []*server.FieldError{{Field: "id", Msg: "must be a plan id (a positive integer)"}}})
		return 0, false
	}
	return id, true
}
