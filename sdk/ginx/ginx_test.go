package ginx_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/switchyard-io/switchyard/internal/etcdtest"
	"github.com/switchyard-io/switchyard/sdk"
	"github.com/switchyard-io/switchyard/sdk/ginx"
	"github.com/switchyard-io/switchyard/sdk/wire"
)

const ns, app = "test", "shop"

func put(t *testing.T, cli *clientv3.Client, key string, v any) {
	t.Helper()
	b, _ := json.Marshal(v)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, key, string(b)); err != nil {
		t.Fatal(err)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func TestGinMiddleware(t *testing.T) {
	gin.SetMode(gin.TestMode)
	srv := etcdtest.Start(t)
	cli := srv.Client(t)
	c, err := sdk.New(context.Background(), sdk.Config{Endpoints: []string{srv.Endpoint}, Namespace: ns, App: app, LeaseTTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })

	var enqueued atomic.Int64
	var seen sync.Map
	router := gin.New()
	router.Use(ginx.Middleware(c, sdk.MiddlewareOptions{
		Switches: []*sdk.Handle{c.Switch("db-readonly"), c.Switch("orders-queue")},
		Enqueuer: sdk.EnqueuerFunc(func(context.Context, sdk.QueuedWrite) error { enqueued.Add(1); return nil }),
	}))
	h := func(gc *gin.Context) {
		seen.Store(gc.Request.Method, sdk.DegradedLevel(gc.Request.Context()))
		gc.JSON(http.StatusOK, gin.H{"ok": true})
	}
	router.GET("/orders/:id", h)
	router.POST("/orders", h)
	ts := httptest.NewServer(router)
	t.Cleanup(ts.Close)

	do := func(method, path string, hdr ...string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, ts.URL+path, strings.NewReader("{}"))
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}

	// A rule on gin's route pattern.
	r := wire.LimitRule{App: app, Resource: "GET /orders/:id", Kind: wire.KindTokenBucket, Mode: wire.ModeEnforce,
		Scope: wire.ScopeInstance, Rate: 0.01, Burst: 1, Version: 1}
	put(t, cli, wire.LimitKey(ns, app, r.Resource), r)
	l := c.Limiter(r.Resource)
	waitFor(t, "rule", func() bool { return l.Rule() != nil })
	if resp := do("GET", "/orders/1"); resp.StatusCode != http.StatusOK {
		t.Fatalf("first GET: %d", resp.StatusCode)
	}
	resp := do("GET", "/orders/2")
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "100" ||
		resp.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("second GET: %d %v", resp.StatusCode, resp.Header)
	}

	flip := func(name string, level wire.Level, st string) {
		put(t, cli, wire.SwitchKey(ns, app, name), wire.Switch{App: app, Name: name, Level: level, State: st, Rollout: wire.Rollout{Percent: 100}, Version: 1})
		h := c.Switch(name)
		waitFor(t, name, func() bool { return h.On(context.Background()) == (st == wire.StateOn) })
	}
	flip("db-readonly", wire.L4, wire.StateOn)
	if resp := do("POST", "/orders"); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("POST under L4: %d", resp.StatusCode)
	}
	if _, ok := seen.Load("POST"); ok {
		t.Error("write reached the handler under L4")
	}
	flip("db-readonly", wire.L4, wire.StateOff)
	flip("orders-queue", wire.L5, wire.StateOn)
	for range 3 {
		if resp := do("POST", "/orders", "Idempotency-Key", "k-1"); resp.StatusCode != http.StatusAccepted {
			t.Errorf("POST under L5: %d", resp.StatusCode)
		}
	}
	if enqueued.Load() != 1 {
		t.Errorf("enqueued %d times, want 1", enqueued.Load())
	}
	flip("orders-queue", wire.L5, wire.StateOff)
	if resp := do("POST", "/orders"); resp.StatusCode != http.StatusOK {
		t.Errorf("POST after recovery: %d", resp.StatusCode)
	}
	if lv, _ := seen.Load("POST"); lv != wire.Level("") {
		t.Errorf("normal write saw level %v", lv)
	}
}
