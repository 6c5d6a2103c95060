package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sort"
	"sync"

	"github.com/switchyard-io/switchyard/sdk"
)

// The switches the demo reads, one per degradation level it shows. Create
// them in the console under the app the demo runs as ("checkout").
const (
	SwitchRecommendations = "recommendations"  // L1: serve the switch's fallback list
	SwitchReviews         = "reviews"          // L3: leave reviews off the product page
	SwitchOrdersReadOnly  = "orders-read-only" // L4: order writes fail explicitly (503)
	SwitchOrdersQueue     = "orders-queue"     // L5: order writes are queued (202)
)

// maxOrderBody bounds an order request body.
const maxOrderBody = 64 << 10

// Order is what POST /orders takes and GET /orders lists.
type Order struct {
	ID    string `json:"id"`
	Item  string `json:"item"`
	Count int    `json:"count"`
	// Queued is true for an order accepted under L5 and applied later.
	Queued bool `json:"queued,omitempty"`
}

// shop is the demo's business logic: a product page with recommendations
// and reviews, and an order book. Its degradations come from the SDK
// client; everything else is deliberately trivial.
type shop struct {
	log             *slog.Logger
	recommendations *sdk.Handle
	reviews         *sdk.Handle
	guard           func(http.Handler) http.Handler
	// pageGuard is guard for the product page, which also verifies the
	// recommendations fallback while the switch is off.
	pageGuard func(http.Handler) http.Handler

	mu     sync.Mutex
	orders map[string]Order
	queue  chan Order
}

// newShop wires the shop to the client's switches. Queued orders are
// applied by run until ctx ends.
func newShop(c *sdk.Client, log *slog.Logger) *shop {
	s := &shop{
		log:             log,
		recommendations: c.Switch(SwitchRecommendations),
		reviews:         c.Switch(SwitchReviews),
		orders:          map[string]Order{},
		queue:           make(chan Order, 1024),
	}
	// Every request passes the SDK middleware: limit rules published for
	// its route ("POST /orders", "GET /products/{id}"), and the L4/L5
	// switches for writes.
	guarded := []*sdk.Handle{c.Switch(SwitchOrdersReadOnly), c.Switch(SwitchOrdersQueue)}
	s.guard = c.Middleware(sdk.MiddlewareOptions{Switches: guarded, Enqueuer: s})
	// The product page has no side effects, so while the recommendations
	// switch is off the SDK may serve a sampled page a second time with
	// the fallback and check it still has the live page's shape (shadow
	// verification; the outcome shows on the switch's console page).
	s.pageGuard = c.Middleware(sdk.MiddlewareOptions{Switches: guarded, Verify: []*sdk.Handle{s.recommendations}})
	return s
}

// Handler is the demo's HTTP API.
func (s *shop) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /products/{id}", s.pageGuard(http.HandlerFunc(s.product)))
	mux.Handle("GET /orders", s.guard(http.HandlerFunc(s.listOrders)))
	mux.Handle("POST /orders", s.guard(http.HandlerFunc(s.createOrder)))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") })
	return mux
}

// product is the page a degradation protects: recommendations come from a
// (pretend) slow service unless the L1 switch serves its fallback, and
// reviews are left out while the L3 switch is on.
func (s *shop) product(w http.ResponseWriter, r *http.Request) {
	page := map[string]any{"id": r.PathValue("id")}
	if s.recommendations.On(r.Context()) {
		var fallback []string
		if err := s.recommendations.Fallback(&fallback); err != nil {
			fallback = []string{} // no usable fallback: an empty list, never an error page
		}
		page["recommendations"], page["recommendations_source"] = fallback, "fallback"
	} else {
		page["recommendations"], page["recommendations_source"] = []string{"socks", "laces"}, "live"
	}
	if !s.reviews.On(r.Context()) {
		page["reviews"] = []string{"5/5 would degrade again"}
	}
	writeJSON(w, http.StatusOK, page)
}

func (s *shop) listOrders(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	list := make([]Order, 0, len(s.orders))
	for _, o := range s.orders {
		list = append(list, o)
	}
	s.mu.Unlock()
	sort.Slice(list, func(i, j int) bool { return list[i].ID < list[j].ID })
	writeJSON(w, http.StatusOK, list)
}

// createOrder stores an order at once (the normal path). Under L4 the
// middleware answers 503 before this runs; under L5 it hands the write to
// Enqueue instead.
func (s *shop) createOrder(w http.ResponseWriter, r *http.Request) {
	o, err := decodeOrder(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	_, exists := s.orders[o.ID]
	if !exists {
		s.orders[o.ID] = o
	}
	s.mu.Unlock()
	if exists {
		http.Error(w, fmt.Sprintf("order %q exists", o.ID), http.StatusConflict)
		return
	}
	writeJSON(w, http.StatusCreated, o)
}

// Enqueue implements sdk.Enqueuer for L5: it validates the order now (a
// bad one gets 400, it is not queued) and applies it later. The order's id
// is the Idempotency-Key, so a replay cannot create a second order.
func (s *shop) Enqueue(_ context.Context, qw sdk.QueuedWrite) error {
	o, err := decodeOrder(qw.Request)
	if err != nil {
		return fmt.Errorf("%w: %v", sdk.ErrInvalidWrite, err)
	}
	o.ID, o.Queued = qw.Key, true
	select {
	case s.queue <- o:
		return nil
	default:
		return errors.New("order queue full")
	}
}

// run applies queued orders until ctx ends. A real service would write
// them to a durable queue and apply them when the database recovers.
func (s *shop) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case o := <-s.queue:
			s.mu.Lock()
			if _, dup := s.orders[o.ID]; !dup {
				s.orders[o.ID] = o
			}
			s.mu.Unlock()
			s.log.Info("queued order applied", "id", o.ID)
		}
	}
}

// decodeOrder reads and checks an order body. Without an id it takes the
// Idempotency-Key, so clients that send one need not repeat it.
func decodeOrder(r *http.Request) (Order, error) {
	var o Order
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, maxOrderBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&o); err != nil {
		return o, fmt.Errorf("order: %w", err)
	}
	if o.ID == "" {
		o.ID = r.Header.Get("Idempotency-Key")
	}
	switch {
	case o.ID == "":
		return o, errors.New("order: id or Idempotency-Key required")
	case o.Item == "":
		return o, errors.New("order: item required")
	case o.Count < 1:
		return o, errors.New("order: count must be at least 1")
	}
	return o, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
