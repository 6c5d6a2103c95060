// Package api is the console's JSON API under /api/v1 (gin): switches,
// limit rules, audit log, instances, users and tokens, plus /healthz,
// /readyz and /metrics, one file per domain. Handlers only translate HTTP
// to server.Service calls; errors become RFC 9457 problem documents in one
// place (problem.go).
package api

import (
	"context"
	"encoding/base64"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/switchyard-io/switchyard/sdk/wire"
	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/fleet"
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
	// Fleet is the console's fleet read model (instances and signals).
	Fleet *fleet.Model
	// Domains are the job domains' routes (domains.go).
	Domains []Routes
}

type handler struct {
	svc   *server.Service
	etcd  *clientv3.Client
	fleet *fleet.Model
	ns    string
}

// Register mounts the API, health and metrics routes on r.
func Register(r *gin.Engine, cfg Config) {
	h := &handler{svc: cfg.Service, etcd: cfg.Etcd, fleet: cfg.Fleet, ns: cfg.Namespace}
	r.UseRawPath = true
	r.UnescapePathValues = true
	r.Use(requestID, trailingNewline)
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
	apps := v1.Group("/apps/:app", checkApp, breakGlass)
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
	apps.GET("/switches/:name/signals", h.switchSignals)
	apps.GET("/limits/:resource/signals", h.limitSignals)
	apps.GET("/instances", h.instances)
	v1.GET("/switches", h.listAllSwitches)
	v1.GET("/audit", h.listAudit)
	v1.GET("/audit/verify", h.verifyAudit)
	v1.GET("/audit/checkpoint", h.latestCheckpoint)
	v1.GET("/audit/checkpoints", h.listCheckpoints)
	v1.GET("/audit/proof/inclusion", h.inclusionProof)
	v1.GET("/audit/proof/consistency", h.consistencyProof)
	v1.GET("/users", h.listUsers)
	v1.POST("/users", h.createUser)
	v1.GET("/users/:username", h.getUser)
	v1.PATCH("/users/:username", h.patchUser)
	for _, d := range cfg.Domains {
		d(apps, v1)
	}
	registerApprovals(apps, v1, h)
	v1.GET("/tokens", h.listTokens)
	v1.POST("/tokens", h.createToken)
	v1.DELETE("/tokens/:id", h.revokeToken)
	r.NoRoute(func(c *gin.Context) { fail(c, server.ErrNotFound) })
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

// same is the view of an entry that is its own view.
func same[T any](t *T) T { return *t }

func views[T any, V any](items []T, view func(*T) V) []V {
	out := make([]V, 0, len(items))
	for i := range items {
		out = append(out, view(&items[i]))
	}
	return out
}

// listPage answers a list request that has no filters of its own (see
// readPage and answerPage).
func listPage[T any, V any](c *gin.Context, key string, read func(server.Page) ([]T, string, error), view func(*T) V) {
	pg, ok := readPage(c, nil)
	if !ok {
		return
	}
	list, next, err := read(pg)
	if err != nil {
		fail(c, err)
		return
	}
	answerPage(c, gin.H{key: views(list, view)}, next)
}

// readPage reads the paging every list takes — limit (default 100, at
// most 1000) and cursor (the next_cursor of the previous page) — and
// answers the problem, naming each bad parameter with those in bad (the
// list's own filters), when any is wrong.
func readPage(c *gin.Context, bad []*server.FieldError) (server.Page, bool) {
	pg := server.Page{Limit: int(queryInt(c, "limit", server.MaxPageLimit, &bad))}
	if pg.Limit == 0 {
		pg.Limit = server.DefaultPageLimit
	}
	if s := c.Query("cursor"); s != "" {
		key, err := base64.RawURLEncoding.DecodeString(s)
		if err != nil || len(key) == 0 {
			bad = append(bad, &server.FieldError{Field: "cursor", Msg: "is not a cursor of this list; pass the next_cursor of its previous page"})
		}
		pg.After = string(key)
	}
	if len(bad) > 0 {
		fail(c, &server.ValidationError{Fields: bad})
		return pg, false
	}
	return pg, true
}

// answerPage answers one page of a list: body holds the entries (and any
// summary of the whole list); next_cursor, the cursor of the next page, is
// there only when another page follows.
func answerPage(c *gin.Context, body gin.H, next string) {
	if next != "" {
		body["next_cursor"] = base64.RawURLEncoding.EncodeToString([]byte(next))
	}
	c.JSON(http.StatusOK, body)
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
