package api

import (
	"net/http"
	"slices"

	"github.com/gin-gonic/gin"

	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/notify"
)

// Notification channels and their delivery log: admins only. A channel's
// secret is accepted on create and patch and never returned.

type channelHandler struct{ svc *notify.Service }

func registerChannels(v1 *gin.RouterGroup, svc *notify.Service) {
	h := channelHandler{svc}
	v1.GET("/channels", h.list)
	v1.POST("/channels", h.create)
	v1.GET("/channels/:channel", h.get)
	v1.PATCH("/channels/:channel", h.patch)
	v1.DELETE("/channels/:channel", h.remove)
	v1.POST("/channels/:channel/test", h.test)
	v1.GET("/deliveries", h.deliveries)
}

func (h channelHandler) list(c *gin.Context) {
	if !requireAdmin(c) {
		return
	}
	listPage(c, "channels", func(pg server.Page) ([]notify.Channel, string, error) {
		return h.svc.ListChannels(c.Request.Context(), pg)
	}, (*notify.Channel).View)
}

func (h channelHandler) get(c *gin.Context) {
	if !requireAdmin(c) {
		return
	}
	ch, err := h.svc.GetChannel(c.Request.Context(), c.Param("channel"))
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"channel": ch.View()})
}

func (h channelHandler) create(c *gin.Context) {
	if !requireAdmin(c) {
		return
	}
	var in notify.ChannelInput
	if !bindAll(c, &in) {
		return
	}
	ch, err := h.svc.CreateChannel(c.Request.Context(), actor(c), in)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, gin.H{"channel": ch.View()})
}

func (h channelHandler) patch(c *gin.Context) {
	if !requireAdmin(c) {
		return
	}
	var p notify.ChannelPatch
	if !bindAll(c, &p) {
		return
	}
	ch, err := h.svc.UpdateChannel(c.Request.Context(), actor(c), c.Param("channel"), p)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"channel": ch.View()})
}

func (h channelHandler) remove(c *gin.Context) {
	if !requireAdmin(c) {
		return
	}
	ch, ok := bindChange(c)
	if !ok {
		return
	}
	if err := h.svc.DeleteChannel(c.Request.Context(), actor(c), c.Param("channel"), ch); err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"deleted": true})
}

// test sends a channel.test event to the channel now and answers with its
// entry in the delivery log (status delivered or failed, the response
// code, the error).
func (h channelHandler) test(c *gin.Context) {
	if !requireAdmin(c) {
		return
	}
	ch, ok := bindChange(c)
	if !ok {
		return
	}
	d, err := h.svc.SendTest(c.Request.Context(), actor(c), c.Param("channel"), ch)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"delivery": d})
}

// deliveries is the delivery log, newest first: ?channel=&status=, paged.
func (h channelHandler) deliveries(c *gin.Context) {
	if !requireAdmin(c) {
		return
	}
	var bad []*server.FieldError
	f := notify.DeliveryFilter{Channel: c.Query("channel"), Status: c.Query("status")}
	if f.Status != "" && !slices.Contains(notify.Statuses, f.Status) {
		bad = append(bad, &server.FieldError{Field: "status", Msg: "must be one of pending, sending, delivered, failed"})
	}
	var ok bool
	if f.Page, ok = readPage(c, bad); !ok {
		return
	}
	list, next, err := h.svc.Deliveries(c.Request.Context(), f)
	if err != nil {
		fail(c, err)
		return
	}
	answerPage(c, gin.H{"deliveries": list}, next)
}
