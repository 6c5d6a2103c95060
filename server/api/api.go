// Package api is the console's JSON API under /api/v1 (gin): switches,
// limit rules, audit log, instances and tokens, plus /healthz, /readyz and
// /metrics. Handlers only translate HTTP to server.Service calls; errors
// become RFC 9457 problem documents in one place (problem.go).
package api

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/sdk/wire"
	"github.com/switchyard-io/switchyard/server"
)

// Config wires the API to its dependencies.
type Config struct {
	Service   *server.Service
	Etcd      *clientv3.Client
	Namespace string
	// Registry serves /metrics and receives the HTTP metrics.
	Registry *prometheus.Registry
	// Logger receives the cause of every 5xx answer (nil: discarded).
	Logger *slog.Logger
}

type handler struct {
	svc  *server.Service
	etcd *clientv3.Client
	ns   string
}

// Register mounts the API, health and metrics routes on r.
func Register(r *gin.Engine, cfg Config) {
	h := &handler{svc: cfg.Service, etcd: cfg.Etcd, ns: cfg.Namespace}
	r.UseRawPath = true
	r.UnescapePathValues = true
	r.Use(requestID)
	if cfg.Logger != nil {
		r.Use(logFailures(cfg.Logger))
	}
	if cfg.Registry != nil {
		r.Use(newHTTPMetrics(cfg.Registry).handle)
		r.GET("/metrics", gin.WrapH(promhttp.HandlerFor(cfg.Registry, promhttp.HandlerOpts{})))
	}
	r.GET("/healthz", func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"status": "ok"}) })
	r.GET("/readyz", h.ready)

	v1 := r.Group("/api/v1", authenticate(cfg.Service))
	apps := v1.Group("/apps/:app", checkApp)
	apps.GET("/switches", h.listSwitches)
	apps.POST("/switches", h.createSwitch)
	apps.GET("/switches/:name", h.getSwitch)
	apps.PATCH("/switches/:name", h.patchSwitch)
	apps.DELETE("/switches/:name", h.deleteSwitch)
	apps.POST("/switches/:name/on", h.toggleSwitch(true))
	apps.POST("/switches/:name/off", h.toggleSwitch(false))
	apps.GET("/limits", h.listLimits)
	apps.POST("/limits", h.createLimit)
	apps.GET("/limits/:resource", h.getLimit)
	apps.PATCH("/limits/:resource", h.patchLimit)
	apps.DELETE("/limits/:resource", h.deleteLimit)
	apps.POST("/limits/:resource/on", h.toggleLimit(wire.StateOn))
	apps.POST("/limits/:resource/off", h.toggleLimit(wire.StateOff))
	apps.GET("/instances", h.instances)
	v1.GET("/switches", h.listAllSwitches)
	v1.GET("/audit", h.listAudit)
	v1.GET("/audit/verify", h.verifyAudit)
	v1.GET("/tokens", h.listTokens)
	v1.POST("/tokens", h.createToken)
	v1.DELETE("/tokens/:id", h.revokeToken)
	r.NoRoute(func(c *gin.Context) { fail(c, server.ErrNotFound) })
}

// changed answers a successful change with the entity and its receipt.
func changed(c *gin.Context, status int, key string, entity any, rc server.Receipt) {
	c.JSON(status, gin.H{key: entity, "published": rc.Published, "revision": rc.Revision})
}

func (h *handler) ready(c *gin.Context) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), 2*time.Second)
	defer cancel()
	checks := gin.H{"database": "ok", "etcd": "ok"}
	status := http.StatusOK
	if db, err := h.svc.DB().DB(); err != nil || db.PingContext(ctx) != nil {
		checks["database"], status = "unreachable", http.StatusServiceUnavailable
	}
	if _, err := h.etcd.Get(ctx, wire.ElectionKey(h.ns), clientv3.WithCountOnly()); err != nil {
		checks["etcd"], status = "unreachable", http.StatusServiceUnavailable
	}
	c.JSON(status, checks)
}

func views[T any, V any](items []T, view func(*T) V) []V {
	out := make([]V, 0, len(items))
	for i := range items {
		out = append(out, view(&items[i]))
	}
	return out
}

// listPage answers a list request paged by the query's limit (default
// 100, at most 1000) and after (the next_after of the previous page).
func listPage[T any, V any](c *gin.Context, key string, read func(server.Page) ([]T, string, error), view func(*T) V) {
	var v []*server.FieldError
	pg := server.Page{After: c.Query("after"), Limit: int(queryInt(c, "limit", 1000, &v))}
	if len(v) > 0 {
		fail(c, &server.ValidationError{Fields: v})
		return
	}
	if pg.Limit == 0 {
		pg.Limit = 100
	}
	list, next, err := read(pg)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{key: views(list, view), "next_after": next})
}

// queryInt parses an optional positive integer query parameter up to max,
// adding a field error to v when it is bad (0 when absent).
func queryInt(c *gin.Context, name string, max int64, v *[]*server.FieldError) int64 {
	s := c.Query(name)
	if s == "" {
		return 0
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 1 || n > max {
		*v = append(*v, &server.FieldError{Field: name, Msg: "must be a positive integer up to " + strconv.FormatInt(max, 10)})
	}
	return n
}

func (h *handler) listSwitches(c *gin.Context) {
	listPage(c, "switches", func(pg server.Page) ([]server.Switch, string, error) {
		return h.svc.SwitchPage(c.Request.Context(), c.Param("app"), pg)
	}, (*server.Switch).View)
}

func (h *handler) listAllSwitches(c *gin.Context) {
	listPage(c, "switches", func(pg server.Page) ([]server.Switch, string, error) {
		return h.svc.SwitchPage(c.Request.Context(), "", pg)
	}, (*server.Switch).View)
}

func (h *handler) createSwitch(c *gin.Context) {
	var in server.SwitchInput
	if !bind(c, &in) {
		return
	}
	sw, rc, err := h.svc.CreateSwitch(c.Request.Context(), actor(c), c.Param("app"), in)
	if err != nil {
		fail(c, err)
		return
	}
	changed(c, http.StatusCreated, "switch", sw.View(), rc)
}

func (h *handler) getSwitch(c *gin.Context) {
	sw, err := h.svc.GetSwitch(c.Request.Context(), c.Param("app"), c.Param("name"))
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"switch": sw.View()})
}

func (h *handler) patchSwitch(c *gin.Context) {
	var p server.SwitchPatch
	if !bind(c, &p) {
		return
	}
	sw, rc, err := h.svc.PatchSwitch(c.Request.Context(), actor(c), c.Param("app"), c.Param("name"), p)
	if err != nil {
		fail(c, err)
		return
	}
	changed(c, http.StatusOK, "switch", sw.View(), rc)
}

func (h *handler) toggleSwitch(on bool) gin.HandlerFunc {
	return func(c *gin.Context) {
		var t server.Toggle
		if !bind(c, &t) {
			return
		}
		turn := h.svc.TurnOff
		if on {
			turn = h.svc.TurnOn
		}
		sw, rc, err := turn(c.Request.Context(), actor(c), c.Param("app"), c.Param("name"), t)
		if err != nil {
			fail(c, err)
			return
		}
		changed(c, http.StatusOK, "switch", sw.View(), rc)
	}
}

// bindChange reads the reason and version of a DELETE from its JSON body or,
// without a body, from the query string.
func bindChange(c *gin.Context) (server.Change, bool) {
	var ch server.Change
	if c.Request.ContentLength != 0 && c.GetHeader("Content-Type") != "" {
		return ch, bind(c, &ch)
	}
	ch.Reason = c.Query("reason")
	if v := c.Query("version"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			fail(c, &server.ValidationError{Fields: []*server.FieldError{{Field: "version", Msg: "must be an integer"}}})
			return ch, false
		}
		ch.Version = &n
	}
	return ch, true
}

func (h *handler) deleteSwitch(c *gin.Context) {
	ch, ok := bindChange(c)
	if !ok {
		return
	}
	rc, err := h.svc.DeleteSwitch(c.Request.Context(), actor(c), c.Param("app"), c.Param("name"), ch)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"deleted": true, "published": rc.Published, "revision": rc.Revision})
}

func (h *handler) listLimits(c *gin.Context) {
	listPage(c, "limits", func(pg server.Page) ([]server.LimitRule, string, error) {
		return h.svc.LimitPage(c.Request.Context(), c.Param("app"), pg)
	}, (*server.LimitRule).View)
}

func (h *handler) createLimit(c *gin.Context) {
	var in server.LimitInput
	if !bind(c, &in) {
		return
	}
	r, rc, err := h.svc.CreateLimit(c.Request.Context(), actor(c), c.Param("app"), in)
	if err != nil {
		fail(c, err)
		return
	}
	changed(c, http.StatusCreated, "limit", r.View(), rc)
}

func (h *handler) getLimit(c *gin.Context) {
	r, err := h.svc.GetLimit(c.Request.Context(), c.Param("app"), c.Param("resource"))
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"limit": r.View()})
}

func (h *handler) patchLimit(c *gin.Context) {
	var p server.LimitPatch
	if !bind(c, &p) {
		return
	}
	r, rc, err := h.svc.PatchLimit(c.Request.Context(), actor(c), c.Param("app"), c.Param("resource"), p)
	if err != nil {
		fail(c, err)
		return
	}
	changed(c, http.StatusOK, "limit", r.View(), rc)
}

func (h *handler) toggleLimit(state string) gin.HandlerFunc {
	return func(c *gin.Context) {
		var t server.Toggle
		if !bind(c, &t) {
			return
		}
		r, rc, err := h.svc.SetLimitState(c.Request.Context(), actor(c), c.Param("app"), c.Param("resource"), state, t)
		if err != nil {
			fail(c, err)
			return
		}
		changed(c, http.StatusOK, "limit", r.View(), rc)
	}
}

func (h *handler) deleteLimit(c *gin.Context) {
	ch, ok := bindChange(c)
	if !ok {
		return
	}
	rc, err := h.svc.DeleteLimit(c.Request.Context(), actor(c), c.Param("app"), c.Param("resource"), ch)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"deleted": true, "published": rc.Published, "revision": rc.Revision})
}

// instances lists the SDK instances registered for the app in etcd.
func (h *handler) instances(c *gin.Context) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), 3*time.Second)
	defer cancel()
	resp, err := h.etcd.Get(ctx, wire.AppPrefix(h.ns, wire.KindInstances, c.Param("app")), clientv3.WithPrefix())
	if err != nil {
		_ = c.Error(err)
		c.Header("Content-Type", ProblemContentType)
		c.AbortWithStatusJSON(http.StatusServiceUnavailable, Problem{
			Type: "/problems/etcd-unavailable", Title: "etcd unavailable", Status: http.StatusServiceUnavailable,
			Detail: "instances are read from etcd, which did not answer",
		})
		return
	}
	list := make([]wire.Instance, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var in wire.Instance
		if json.Unmarshal(kv.Value, &in) == nil {
			list = append(list, in)
		}
	}
	c.JSON(http.StatusOK, gin.H{"instances": list, "revision": resp.Header.Revision})
}

func (h *handler) listAudit(c *gin.Context) {
	f, err := auditFilter(c)
	if err != nil {
		fail(c, err)
		return
	}
	events, next, err := audit.List(c.Request.Context(), h.svc.DB(), f)
	if err != nil {
		fail(c, server.ErrUnavailable)
		return
	}
	c.JSON(http.StatusOK, gin.H{"events": events, "next_before": next})
}

// auditFilter parses the audit query: target, actor, action, since, until
// (RFC 3339), limit and before (paging cursor).
func auditFilter(c *gin.Context) (audit.Filter, error) {
	f := audit.Filter{Target: c.Query("target"), Actor: c.Query("actor"), Action: c.Query("action")}
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
	res, err := audit.Verify(c.Request.Context(), h.svc.DB())
	if err != nil {
		fail(c, server.ErrUnavailable)
		return
	}
	c.JSON(http.StatusOK, gin.H{"ok": res.OK(), "events": res.Events, "head_hash": res.HeadHash, "mismatch": res.Mismatch})
}

func (h *handler) listTokens(c *gin.Context) {
	if actor(c).Role != server.RoleAdmin {
		fail(c, server.ErrForbidden)
		return
	}
	ts, err := h.svc.ListTokens(c.Request.Context())
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"tokens": views(ts, (*server.Token).View)})
}

func (h *handler) createToken(c *gin.Context) {
	var in server.TokenInput
	if !bind(c, &in) {
		return
	}
	secret, t, err := h.svc.CreateToken(c.Request.Context(), actor(c), in)
	if err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, gin.H{"token": secret, "info": t.View()})
}

func (h *handler) revokeToken(c *gin.Context) {
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil {
		fail(c, &server.ValidationError{Fields: []*server.FieldError{{Field: "id", Msg: "must be an integer"}}})
		return
	}
	ch, ok := bindChange(c)
	if !ok {
		return
	}
	if err := h.svc.RevokeToken(c.Request.Context(), actor(c), id, ch); err != nil {
		fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"revoked": true})
}
