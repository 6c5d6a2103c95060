package api

import (
	"context"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/trigger"
)

// triggers serves /apps/{app}/triggers: the auto-trigger rules (see
// docs/triggers.md).
type triggers struct{ svc *trigger.Service }

func registerTriggers(apps *gin.RouterGroup, svc *trigger.Service) {
	t := &triggers{svc: svc}
	apps.GET("/triggers", t.list)
	apps.POST("/triggers", t.create)
	apps.POST("/triggers/preview", t.preview)
	apps.GET("/triggers/:name", t.get)
	apps.PATCH("/triggers/:name", t.update)
	apps.DELETE("/triggers/:name", t.delete)
	apps.POST("/triggers/:name/pause", t.state(svc.Pause))
	apps.POST("/triggers/:name/resume", t.state(svc.Resume))
	apps.POST("/triggers/:name/confirm", t.state(svc.Confirm))
	apps.GET("/triggers/:name/evaluations", t.evaluations)
}

func (t *triggers) list(c *gin.Context) {
	listPage(c, "triggers", func(pg server.Page) ([]trigger.View, string, error) {
		return t.svc.List(c.Request.Context(), c.Param("app"), pg)
	}, same[trigger.View])
}

func (t *triggers) create(c *gin.Context) {
	var in trigger.Input
	if !bindAll(c, &in) {
		return
	}
	v, err := t.svc.Create(c.Request.Context(), actor(c), c.Param("app"), in)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, gin.H{"trigger": v})
}

func (t *triggers) get(c *gin.Context) {
	v, err := t.svc.Get(c.Request.Context(), c.Param("app"), c.Param("name"))
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"trigger": v})
}

func (t *triggers) update(c *gin.Context) {
	var p trigger.Patch
	if !bind(c, &p) {
		return
	}
	v, err := t.svc.Update(c.Request.Context(), actor(c), c.Param("app"), c.Param("name"), p)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"trigger": v})
}

func (t *triggers) delete(c *gin.Context) {
	ch, ok := bindChange(c)
	if !ok {
		return
	}
	if err := t.svc.Delete(c.Request.Context(), actor(c), c.Param("app"), c.Param("name"), ch); err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"deleted": true})
}

// state serves a change of a rule's state by a person (pause, resume,
// confirm recovery): body reason and optionally the rule's version.
func (t *triggers) state(change func(ctx context.Context, a server.Actor, app, name string, ch server.Change) (*trigger.View, error)) gin.HandlerFunc {
	return func(c *gin.Context) {
		var ch server.Change
		if !bind(c, &ch) {
			return
		}
		v, err := change(c.Request.Context(), actor(c), c.Param("app"), c.Param("name"), ch)
		if err != nil {
			fail(c, err)
			return
		}
		c.JSON(http.StatusOK, gin.H{"trigger": v})
	}
}

func (t *triggers) evaluations(c *gin.Context) {
	listPage(c, "evaluations", func(pg server.Page) ([]trigger.Evaluation, string, error) {
		return t.svc.Evaluations(c.Request.Context(), c.Param("app"), c.Param("name"), pg)
	}, same[trigger.Evaluation])
}

func (t *triggers) preview(c *gin.Context) {
	var in trigger.PreviewInput
	if !bindAll(c, &in) {
		return
	}
	p, err := t.svc.Preview(c.Request.Context(), actor(c), c.Param("app"), in)
	if err != nil {
		fail(c, err)
		return
	}
	if refusePending(c) {
		return
	}
	c.JSON(http.StatusOK, gin.H{"preview": p})
}
