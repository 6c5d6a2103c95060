package sdk_test

import (
	"context"
	"encoding/json"
	"log"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-io/switchyard/sdk"
)

// The service code below stands in for the application's own.

func liveRecommendations(context.Context) []string { return []string{"socks", "laces"} }

func loadReviews(context.Context) []string { return []string{"5/5"} }

func createOrder(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusCreated) }

// orderQueue takes the writes an L5 switch queues.
var orderQueue = sdk.EnqueuerFunc(func(context.Context, sdk.QueuedWrite) error { return nil })

// A service embeds the SDK: handles for the switches its code checks, and
// the middleware for limit rules and the write levels L4 and L5. This body
// is the README's SDK snippet (TestDocGoBlocksAreExamples keeps them equal).
func Example_service() {
	ctx := context.Background()
	client, err := sdk.New(ctx, sdk.Config{
		Endpoints:   []string{"http://127.0.0.1:2379"},
		App:         "checkout",            // Namespace defaults to "default"
		SnapshotDir: "/var/lib/switchyard", // serve the last known state while etcd is down
		Registerer:  prometheus.DefaultRegisterer,
	})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()

	// Resolve handles once and keep them: On is an atomic load, no allocation.
	recommendations := client.Switch("recommendations") // L1
	reviews := client.Switch("reviews")                 // L3

	mux := http.NewServeMux()
	mux.HandleFunc("GET /products/{id}", func(w http.ResponseWriter, r *http.Request) {
		page := map[string]any{"id": r.PathValue("id")}
		if recommendations.On(r.Context()) {
			var fallback []string
			_ = recommendations.Fallback(&fallback) // the switch's JSON payload
			page["recommendations"] = fallback
		} else {
			page["recommendations"] = liveRecommendations(r.Context())
		}
		if !reviews.On(r.Context()) {
			page["reviews"] = loadReviews(r.Context())
		}
		json.NewEncoder(w).Encode(page)
	})
	mux.HandleFunc("POST /orders", createOrder)

	// Limit rules (429 + Retry-After), open breakers (503), L4 read-only
	// (503 on writes) and L5 queued writes (202 through the Enqueuer).
	guard := client.Middleware(sdk.MiddlewareOptions{
		Switches: []*sdk.Handle{client.Switch("orders-read-only"), client.Switch("orders-queue")},
		Enqueuer: orderQueue,
		Mux:      mux,
	})
	log.Fatal(http.ListenAndServe("127.0.0.1:8070", guard(mux)))
}
