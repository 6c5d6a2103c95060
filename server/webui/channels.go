package webui

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/notify"
)

// Notification channels (admins only): the list with each channel's edit,
// delete and "send test" forms, the create form, and the delivery log.

func (h *handler) registerChannels(in *gin.RouterGroup, svc *notify.Service) {
	ch := channelPages{h: h, svc: svc}
	in.GET("/channels", func(c *gin.Context) { ch.show(c, http.StatusOK, "", nil, nil) })
	in.POST("/channels", ch.create)
	in.POST("/channels/:channel", ch.update)
	in.POST("/channels/:channel/delete", ch.remove)
	in.POST("/channels/:channel/test", ch.test)
}

type channelPages struct {
	h   *handler
	svc *notify.Service
}

// show renders the channels page, admins only, with err attached to form
// (refilled from what was posted, never the secret) and extra merged into
// its data (a test's outcome).
func (p channelPages) show(c *gin.Context, status int, form string, err error, extra map[string]any) {
	if !isAdmin(c) {
		p.h.render(c, http.StatusForbidden, "message", &page{Title: "Admins only", Error: "Only admins manage notification channels."})
		return
	}
	pg := &page{Title: "Notification channels", Nav: "channels"}
	list, _, lerr := p.svc.ListChannels(c.Request.Context(), server.Page{})
	filter := notify.DeliveryFilter{Channel: c.Query("channel"), Page: server.Page{Limit: 50}}
	log, _, derr := p.svc.Deliveries(c.Request.Context(), filter)
	data := map[string]any{"Channels": channelRows(list), "Deliveries": log, "Channel": filter.Channel, "Kinds": notify.Kinds, "Formats": []string{notify.FormatJSON, notify.FormatSlack}}
	// ?tested=<id>: where "Send test" leads, the test's outcome on top.
	if id, perr := strconv.ParseInt(c.Query("tested"), 10, 64); perr == nil {
		for _, d := range log {
			if d.ID == id && d.Kind == string(notify.ChannelTest) {
				data["Tested"] = d
			}
		}
	}
	for k, v := range extra {
		data[k] = v
	}
	pg.Data = data
	if err == nil && (lerr != nil || derr != nil) {
		form, err = "page", server.ErrUnavailable
	}
	if err != nil {
		_ = c.Request.ParseForm()
		pg.Values = url.Values{}
		for k, v := range c.Request.PostForm {
			if k != "secret" {
				pg.Values[k] = v
			}
		}
		p.h.fail(c, "channels", pg, form, err)
		return
	}
	p.h.render(c, status, "channels", pg)
}

func (p channelPages) create(c *gin.Context) {
	fp := &formParser{c: c}
	in := notify.ChannelInput{
		Name: fp.str("name"), URL: fp.str("url"), Secret: c.PostForm("secret"), Events: c.PostFormArray("events"),
		Apps: fp.list("apps"), Format: fp.str("format"), Reason: fp.str("reason"),
	}
	ch, err := p.svc.CreateChannel(c.Request.Context(), actor(c), in)
	if err != nil {
		p.show(c, 0, "newchannel", err, nil)
		return
	}
	redirect(c, Prefix+"/channels", "Added channel "+ch.Name+". Its secret is stored and will not be shown again; use “Send test” to check the receiver.")
}

func (p channelPages) update(c *gin.Context) {
	fp := &formParser{c: c}
	name := c.Param("channel")
	u, format, events, apps := fp.str("url"), fp.str("format"), c.PostFormArray("events"), fp.list("apps")
	pt := notify.ChannelPatch{Version: fp.int64Ptr("version"), Reason: fp.str("reason"), URL: &u, Format: &format, Events: &events, Apps: &apps}
	if s := c.PostForm("secret"); s != "" {
		pt.Secret = &s // empty keeps the secret
	}
	if err := fp.err(); err != nil {
		p.show(c, 0, "channel:"+name, err, nil)
		return
	}
	if _, err := p.svc.UpdateChannel(c.Request.Context(), actor(c), name, pt); err != nil {
		p.show(c, 0, "channel:"+name, err, nil)
		return
	}
	redirect(c, Prefix+"/channels", "Saved channel "+name+".")
}

func (p channelPages) remove(c *gin.Context) {
	fp := &formParser{c: c}
	name := c.Param("channel")
	if err := p.svc.DeleteChannel(c.Request.Context(), actor(c), name, server.Change{Reason: fp.str("reason"), Version: fp.int64Ptr("version")}); err != nil {
		p.show(c, 0, "channel:"+name, err, nil)
		return
	}
	redirect(c, Prefix+"/channels", "Deleted channel "+name+" and its delivery log.")
}

// test sends a test event now, then leads to the channel's delivery log
// with what the receiver answered on top: a reload shows the answer again
// rather than sending another test.
func (p channelPages) test(c *gin.Context) {
	name := c.Param("channel")
	fp := &formParser{c: c}
	d, err := p.svc.SendTest(c.Request.Context(), actor(c), name, server.Change{Reason: fp.str("reason")})
	if err != nil {
		p.show(c, 0, "test:"+name, err, nil)
		return
	}
	redirect(c, Prefix+"/channels?"+queryString("channel", name, "tested", strconv.FormatInt(d.ID, 10))+"#test-result", "")
}

// Checked reports whether a checkbox of field with value is ticked: as
// submitted when form failed, else as in def.
func (p *page) Checked(form, field, value string, def []string) bool {
	list := def
	if p.Form == form && p.Values != nil {
		list = p.Values[field]
	}
	return slices.Contains(list, value)
}

// ChannelRow is a channel as the channels page lists it: the URL shown by
// its scheme and host, the whole of it in the edit form only.
type ChannelRow struct {
	notify.ChannelView
	Shown string
}

func channelRows(list []notify.Channel) []ChannelRow {
	out := make([]ChannelRow, 0, len(list))
	for i := range list {
		out = append(out, ChannelRow{ChannelView: list[i].View(), Shown: notify.RedactURL(list[i].URL)})
	}
	return out
}
