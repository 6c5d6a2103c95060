package sdk_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/switchyard-io/switchyard/internal/embedetcd"
	"github.com/switchyard-io/switchyard/sdk"
	"github.com/switchyard-io/switchyard/sdk/limit"
	"github.com/switchyard-io/switchyard/sdk/wire"
)

// exampleEtcd starts a throwaway embedded etcd and returns its endpoint,
// a client to publish with, and a stop function.
func exampleEtcd() (string, *clientv3.Client, func()) {
	free := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			panic(err)
		}
		defer l.Close()
		return "http://" + l.Addr().String()
	}
	dir, err := os.MkdirTemp("", "switchyard-example")
	if err != nil {
		panic(err)
	}
	srv, err := embedetcd.Start(embedetcd.Config{Dir: dir, ClientURL: free(), PeerURL: free()})
	if err != nil {
		panic(err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.Endpoint}, DialTimeout: 5 * time.Second})
	if err != nil {
		panic(err)
	}
	return srv.Endpoint, cli, func() { cli.Close(); srv.Close(); os.RemoveAll(dir) }
}

// publish writes a value as the console would.
func publish(cli *clientv3.Client, key string, v any) {
	b, _ := json.Marshal(v)
	if _, err := cli.Put(context.Background(), key, string(b)); err != nil {
		panic(err)
	}
}

// applied returns a function that waits (at most 10 s) until client has
// applied a change of the named switch or limit resource. Call it before
// publishing, so the change cannot be missed.
func applied(client *sdk.Client, name string) (wait func()) {
	ch := make(chan struct{}, 1)
	cancel := client.OnChange(func(c sdk.Change) {
		if c.Name == name {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	})
	return func() {
		defer cancel()
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			panic(name + " not applied within 10s")
		}
	}
}

// A service wraps its mux once; limit rules and switches published in etcd
// then act on its requests without a restart.
func ExampleClient_Middleware() {
	endpoint, cli, stop := exampleEtcd()
	defer stop()
	ctx := context.Background()
	client, err := sdk.New(ctx, sdk.Config{Endpoints: []string{endpoint}, Namespace: "prod", App: "checkout",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		panic(err)
	}
	defer client.Close()

	mux := http.NewServeMux()
	mux.HandleFunc("POST /orders", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) })
	mux.HandleFunc("GET /orders/{id}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "degraded=%q", sdk.DegradedLevel(r.Context()))
	})
	readOnly := client.Switch("db-readonly")
	handler := client.Middleware(sdk.MiddlewareOptions{Switches: []*sdk.Handle{readOnly}, Mux: mux})(mux)
	srv := httptest.NewServer(handler)
	defer srv.Close()

	// The console publishes a rule: one order per minute, burst 1.
	ruleApplied := applied(client, "POST /orders")
	publish(cli, wire.LimitKey("prod", "checkout", "POST /orders"), wire.LimitRule{App: "checkout", Resource: "POST /orders",
		Kind: wire.KindTokenBucket, Mode: wire.ModeEnforce, Scope: wire.ScopeInstance, Rate: 1.0 / 60, Burst: 1, Version: 1})
	ruleApplied()
	for range 2 {
		resp, _ := http.Post(srv.URL+"/orders", "application/json", nil)
		resp.Body.Close()
		fmt.Printf("POST /orders %d Retry-After=%q\n", resp.StatusCode, resp.Header.Get("Retry-After"))
	}

	// An operator turns the L4 switch on: reads work, writes fail explicitly.
	switchApplied := applied(client, "db-readonly")
	publish(cli, wire.SwitchKey("prod", "checkout", "db-readonly"), wire.Switch{App: "checkout", Name: "db-readonly",
		Level: wire.L4, State: wire.StateOn, Rollout: wire.Rollout{Percent: 100}, Version: 1})
	switchApplied()
	resp, _ := http.Get(srv.URL + "/orders/7")
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println("GET /orders/7", resp.StatusCode, string(body))
	resp, _ = http.Post(srv.URL+"/orders", "application/json", nil)
	var p sdk.Problem
	json.NewDecoder(resp.Body).Decode(&p)
	resp.Body.Close()
	fmt.Println("POST /orders", resp.StatusCode, p.Reason)
	// Output:
	// POST /orders 201 Retry-After=""
	// POST /orders 429 Retry-After="60"
	// GET /orders/7 200 degraded="L4"
	// POST /orders 503 read_only
}

// Limiter handles guard work outside HTTP: a resource without a published
// rule allows everything, so code can be wrapped before any rule exists.
func ExampleClient_Limiter() {
	client, err := sdk.New(context.Background(), sdk.Config{App: "checkout", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		panic(err)
	}
	defer client.Close()
	ctx := context.Background()
	generate := client.Limiter("inference.generate")
	err = generate.Do(ctx, func(ctx context.Context) error {
		return nil // call the model
	})
	fmt.Println(err, generate.Rule() == nil, generate.Allow(ctx).OK)
	// Output: <nil> true true
}

// ClusterShare is how a cluster-scope quota is split: 100 req/s burst 40
// over 3 instances, floored so no instance gets nothing.
func ExampleClusterShare() {
	r := &wire.LimitRule{Kind: wire.KindTokenBucket, Scope: wire.ScopeCluster, Rate: 100, Burst: 40}
	for _, n := range []int{1, 3, 500} {
		s := sdk.ClusterShare(r, n)
		fmt.Printf("%d instances: rate %.2f burst %d\n", n, s.Rate, s.Burst)
	}
	// Output:
	// 1 instances: rate 100.00 burst 40
	// 3 instances: rate 33.33 burst 14
	// 500 instances: rate 1.00 burst 1
}

// Client-side throttling: calls to a dependency that refuses most of them
// are refused locally, in proportion, instead of piling onto it; the
// caller's criticality travels with the calls that are sent.
func ExampleClient_RoundTripper() {
	endpoint, cli, stop := exampleEtcd()
	defer stop()
	client, err := sdk.New(context.Background(), sdk.Config{Endpoints: []string{endpoint}, Namespace: "prod", App: "checkout",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		panic(err)
	}
	defer client.Close()

	var sent atomic.Int64
	var criticality atomic.Value
	payments := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sent.Add(1)
		criticality.Store(r.Header.Get(sdk.CriticalityHeader))
		w.WriteHeader(http.StatusServiceUnavailable) // overloaded
	}))
	defer payments.Close()

	ruleApplied := applied(client, "payments-api")
	publish(cli, wire.LimitKey("prod", "checkout", "payments-api"), wire.LimitRule{App: "checkout", Resource: "payments-api",
		Kind: wire.KindThrottle, Mode: wire.ModeEnforce, Scope: wire.ScopeInstance, Version: 1})
	ruleApplied()

	hc := &http.Client{Transport: client.RoundTripper("payments-api", nil)}
	ctx := sdk.WithCriticality(context.Background(), sdk.Sheddable)
	throttled := 0
	for range 1000 {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, payments.URL, nil)
		resp, err := hc.Do(req)
		if errors.Is(err, limit.ErrLimited) {
			throttled++
			continue
		}
		resp.Body.Close()
	}
	fmt.Println("sent fewer than 100 of 1000:", sent.Load() < 100, "; throttled the rest:", int(sent.Load())+throttled == 1000)
	fmt.Println("criticality the backend saw:", criticality.Load())
	// Output:
	// sent fewer than 100 of 1000: true ; throttled the rest: true
	// criticality the backend saw: sheddable
}
