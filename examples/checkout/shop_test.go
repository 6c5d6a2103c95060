package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/etcdtest"
	"github.com/switchyard-io/switchyard/internal/pgtest"
	"github.com/switchyard-io/switchyard/internal/servertest"
	"github.com/switchyard-io/switchyard/sdk"
	"github.com/switchyard-io/switchyard/server/console"
)

const token = "checkout-demo-test-token"

// TestDegradationsFromTheConsole drives the demo the way an operator does:
// every switch and limit rule goes through the console's API (real
// Postgres, real etcd), and the demo — an ordinary service embedding the
// SDK — changes its answers without a restart.
func TestDegradationsFromTheConsole(t *testing.T) {
	etcd := etcdtest.Start(t)
	cfg := console.DefaultConfig()
	cfg.Listen, cfg.DataDir, cfg.DatabaseURL = "127.0.0.1:0", t.TempDir(), pgtest.NewDatabase(t)
	cfg.EtcdEndpoints, cfg.BootstrapToken, cfg.Namespace = []string{etcd.Endpoint}, token, "demo"
	con, err := console.Start(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = con.Shutdown(ctx)
	})
	api := consoleAPI{t: t, base: con.URL() + "/api/v1/apps/checkout"}

	client, err := sdk.New(context.Background(), sdk.Config{Endpoints: []string{etcd.Endpoint}, Namespace: "demo", App: "checkout", InstanceID: "demo-1"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s := newShop(client, slog.New(slog.DiscardHandler))
	go s.run(ctx)
	demo := httptest.NewServer(s.Handler())
	t.Cleanup(demo.Close)
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if err := client.WaitReady(wctx); err != nil {
		t.Fatal(err)
	}

	// Normal operation.
	page := getJSON[map[string]any](t, demo.URL+"/products/p1")
	if page["recommendations_source"] != "live" || page["reviews"] == nil {
		t.Fatalf("undegraded page: %v", page)
	}
	if res := post(t, demo.URL+"/orders", `{"id":"o1","item":"socks","count":2}`, ""); res.StatusCode != http.StatusCreated {
		t.Fatalf("order: %d", res.StatusCode)
	}

	// L1 and L3: the product page serves the fallback list and drops reviews.
	api.call("POST", "/switches", `{"name":"recommendations","level":"L1","fallback":["bestsellers"],"reason":"recommender timing out"}`)
	api.call("POST", "/switches/recommendations/on", `{"reason":"recommender timing out"}`)
	api.call("POST", "/switches", `{"name":"reviews","level":"L3","reason":"reviews db hot"}`)
	api.call("POST", "/switches/reviews/on", `{"reason":"reviews db hot"}`)
	servertest.Eventually(t, 5*time.Second, "L1 fallback and L3 off", func() bool {
		p := getJSON[map[string]any](t, demo.URL+"/products/p1")
		recs, _ := p["recommendations"].([]any)
		return p["recommendations_source"] == "fallback" && len(recs) == 1 && recs[0] == "bestsellers" && p["reviews"] == nil
	})

	// L4: order writes fail explicitly, reads keep working.
	api.call("POST", "/switches", `{"name":"orders-read-only","level":"L4","reason":"db failover"}`)
	api.call("POST", "/switches/orders-read-only/on", `{"reason":"db failover"}`)
	servertest.Eventually(t, 5*time.Second, "L4 refuses writes", func() bool {
		return post(t, demo.URL+"/orders", `{"id":"o2","item":"laces","count":1}`, "").StatusCode == http.StatusServiceUnavailable
	})
	if orders := getJSON[[]Order](t, demo.URL+"/orders"); len(orders) != 1 || orders[0].ID != "o1" {
		t.Fatalf("orders under L4: %+v (o2 must not have been written)", orders)
	}

	// L5 instead of L4: writes are queued once per key and applied later.
	api.call("POST", "/switches/orders-read-only/off", `{"reason":"failover done, queue instead"}`)
	api.call("POST", "/switches", `{"name":"orders-queue","level":"L5","reason":"db maintenance"}`)
	api.call("POST", "/switches/orders-queue/on", `{"reason":"db maintenance"}`)
	servertest.Eventually(t, 5*time.Second, "L5 queues writes", func() bool {
		return post(t, demo.URL+"/orders", `{"item":"laces","count":1}`, "o3").StatusCode == http.StatusAccepted
	})
	if res := post(t, demo.URL+"/orders", `{"item":"laces","count":1}`, "o3"); res.StatusCode != http.StatusAccepted {
		t.Fatalf("replayed key: %d", res.StatusCode)
	}
	if res := post(t, demo.URL+"/orders", `{"item":"laces","count":0}`, "o4"); res.StatusCode != http.StatusBadRequest {
		t.Fatalf("malformed queued order: %d, want 400", res.StatusCode)
	}
	servertest.Eventually(t, 5*time.Second, "the queued order applied once", func() bool {
		orders := getJSON[[]Order](t, demo.URL+"/orders")
		return len(orders) == 2 && orders[1].ID == "o3" && orders[1].Queued
	})

	// A limit rule on the route: 429 with Retry-After past the burst.
	api.call("POST", "/switches/orders-queue/off", `{"reason":"maintenance over"}`)
	api.call("POST", "/limits", `{"resource":"GET /products/{id}","kind":"token_bucket","rate":0.5,"burst":2,"reason":"protect the catalog"}`)
	servertest.Eventually(t, 5*time.Second, "the limit rule applies", func() bool {
		res := get(t, demo.URL+"/products/p1")
		return res.StatusCode == http.StatusTooManyRequests && res.Header.Get("Retry-After") != ""
	})
}

// consoleAPI calls the console's JSON API for one app with the admin token.
type consoleAPI struct {
	t    *testing.T
	base string
}

func (a consoleAPI) call(method, path, body string) {
	a.t.Helper()
	req, _ := http.NewRequest(method, a.base+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode >= 300 {
		a.t.Fatalf("%s %s: %d %s", method, path, res.StatusCode, b)
	}
}

func get(t *testing.T, url string) *http.Response {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res
}

func getJSON[T any](t *testing.T, url string) T {
	t.Helper()
	var v T
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", url, res.StatusCode)
	}
	if err := json.NewDecoder(res.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

func post(t *testing.T, url, body, idempotencyKey string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("POST", url, bytes.NewBufferString(body))
	req.Header.Set("Content-Type", "application/json")
	if idempotencyKey != "" {
		req.Header.Set("Idempotency-Key", idempotencyKey)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res
}
