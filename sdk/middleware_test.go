package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/switchyard-io/switchyard/sdk/wire"
)

// shop is a service with the middleware in front of a ServeMux, as a
// service would wire it, on a real httptest server.
type shop struct {
	c     *Client
	cli   *clientv3.Client
	reg   *prometheus.Registry
	srv   *httptest.Server
	seen  sync.Map // "METHOD path" -> degraded level seen by the handler
	calls atomic.Int64
	enq   sync.Map // idempotency key -> *atomic.Int64 Enqueue calls
}

func newShop(t *testing.T, enqueuer Enqueuer) *shop {
	t.Helper()
	return startShop(t, enqueuer, nil)
}

// startShop is newShop; prepare, when set, sees the guard before the
// server starts (to set test hooks).
func startShop(t *testing.T, enqueuer Enqueuer, prepare func(*HTTPGuard)) *shop {
	t.Helper()
	s := &shop{reg: prometheus.NewRegistry()}
	s.c, s.cli = etcdClient(t, Config{Registerer: s.reg})
	mux := http.NewServeMux()
	handler := func(w http.ResponseWriter, r *http.Request) {
		s.calls.Add(1)
		s.seen.Store(r.Method+" "+r.URL.Path, DegradedLevel(r.Context()))
		if r.URL.Query().Get("fail") != "" {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		if r.Method == http.MethodPost {
			w.WriteHeader(http.StatusCreated)
		}
		io.WriteString(w, `{"ok":true}`)
	}
	mux.HandleFunc("GET /orders/{id}", handler)
	mux.HandleFunc("POST /orders", handler)
	mux.HandleFunc("DELETE /orders/{id}", handler)
	mux.HandleFunc("/search", handler)
	if enqueuer == nil {
		enqueuer = EnqueuerFunc(func(ctx context.Context, w QueuedWrite) error {
			if DegradedLevel(ctx) != wire.L5 {
				t.Errorf("Enqueue context level = %q", DegradedLevel(ctx))
			}
			n, _ := s.enq.LoadOrStore(w.Key, new(atomic.Int64))
			n.(*atomic.Int64).Add(1)
			return nil
		})
	}
	guard := s.c.HTTPGuard(MiddlewareOptions{
		Switches: []*Handle{s.c.Switch("db-readonly"), s.c.Switch("orders-queue"), s.c.Switch("recs-off")},
		Mux:      mux,
		Enqueuer: enqueuer,
	})
	if prepare != nil {
		prepare(guard)
	}
	s.srv = httptest.NewServer(guard.Handler(mux))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *shop) do(t testing.TB, method, path string, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, s.srv.URL+path, strings.NewReader(`{"item":1}`))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := s.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func (s *shop) flip(t testing.TB, name string, level wire.Level, on bool) {
	t.Helper()
	st := wire.StateOff
	if on {
		st = wire.StateOn
	}
	sw := mkSwitch("checkout", name, st, 100)
	sw.Level = level
	putSwitch(t, s.cli, "test", sw)
	h := s.c.Switch(name)
	waitFor(t, 10*time.Second, name+" applied", func() bool { return h.On(context.Background()) == on && h.Level() == level })
}

func decodeProblem(t testing.TB, resp *http.Response, body string) Problem {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Errorf("Content-Type = %q", ct)
	}
	var p Problem
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		t.Fatalf("problem body %q: %v", body, err)
	}
	if p.Status != resp.StatusCode || p.Type == "" || p.Title == "" {
		t.Errorf("problem = %+v for status %d", p, resp.StatusCode)
	}
	return p
}

// TestMiddlewareRateLimitLiveChange: 429 with Retry-After and a problem
// body, then a bigger rule from etcd lets the next request through.
func TestMiddlewareRateLimitLiveChange(t *testing.T) {
	s := newShop(t, nil)
	r := rule("POST /orders", wire.KindTokenBucket)
	r.Rate, r.Burst = 0.4, 2 // a token every 2.5 s: Retry-After rounds up to 3
	putRule(t, s.cli, "test", r)
	waitRule(t, s.c.Limiter("POST /orders"), 1)
	for i := range 2 {
		if resp, _ := s.do(t, "POST", "/orders"); resp.StatusCode != http.StatusCreated {
			t.Fatalf("request %d: %d", i, resp.StatusCode)
		}
	}
	resp, body := s.do(t, "POST", "/orders")
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("3rd request: %d %s", resp.StatusCode, body)
	}
	if ra := resp.Header.Get("Retry-After"); ra != "3" {
		t.Errorf("Retry-After = %q, want 3", ra)
	}
	if p := decodeProblem(t, resp, body); p.Reason != ReasonRateLimited || p.Type != "/problems/rate_limited" {
		t.Errorf("problem = %+v", p)
	}
	// Other routes are not limited by this rule; GET /orders/{id} by pattern.
	if resp, _ := s.do(t, "GET", "/orders/7"); resp.StatusCode != http.StatusOK {
		t.Errorf("GET: %d", resp.StatusCode)
	}
	// Live change: a faster rule applies on the next request.
	r.Rate, r.Burst, r.Version = 1e6, 100, 2
	putRule(t, s.cli, "test", r)
	waitRule(t, s.c.Limiter("POST /orders"), 2)
	if resp, body := s.do(t, "POST", "/orders"); resp.StatusCode != http.StatusCreated {
		t.Fatalf("after the rule change: %d %s", resp.StatusCode, body)
	}
	v, _ := series(t, s.reg, "switchyard_sdk_limit_decisions_total",
		map[string]string{"resource": "POST /orders", "decision": DecisionRejected, "reason": ReasonRateLimited})
	if v != 1 {
		t.Errorf("rejected = %v, want 1", v)
	}
}

func TestMiddlewareRoutePatternResource(t *testing.T) {
	s := newShop(t, nil)
	r := rule("GET /orders/{id}", wire.KindSlidingWindow)
	r.Limit, r.Window = 1, wire.Duration(time.Hour)
	putRule(t, s.cli, "test", r)
	waitRule(t, s.c.Limiter("GET /orders/{id}"), 1)
	s.do(t, "GET", "/orders/1")
	if resp, _ := s.do(t, "GET", "/orders/2"); resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("second GET /orders/{id}: %d, want 429 (one rule per pattern)", resp.StatusCode)
	}
	// A pattern without a method is prefixed with the request's.
	r = rule("GET /search", wire.KindSlidingWindow)
	r.Limit, r.Window = 1, wire.Duration(time.Hour)
	putRule(t, s.cli, "test", r)
	waitRule(t, s.c.Limiter("GET /search"), 1)
	s.do(t, "GET", "/search")
	if resp, _ := s.do(t, "GET", "/search"); resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("second GET /search: %d", resp.StatusCode)
	}
	if resp, _ := s.do(t, "POST", "/search"); resp.StatusCode != http.StatusCreated {
		t.Errorf("POST /search limited by the GET rule: %d", resp.StatusCode)
	}
}

func TestMiddlewareShadow(t *testing.T) {
	s := newShop(t, nil)
	r := rule("POST /orders", wire.KindTokenBucket)
	r.Rate, r.Burst, r.Mode = 0.01, 1, wire.ModeShadow
	putRule(t, s.cli, "test", r)
	waitRule(t, s.c.Limiter("POST /orders"), 1)
	for i := range 6 {
		if resp, _ := s.do(t, "POST", "/orders"); resp.StatusCode != http.StatusCreated {
			t.Fatalf("shadow mode rejected request %d: %d", i, resp.StatusCode)
		}
	}
	v, _ := series(t, s.reg, "switchyard_sdk_limit_decisions_total",
		map[string]string{"resource": "POST /orders", "decision": DecisionWouldReject, "reason": ReasonRateLimited})
	if v != 5 {
		t.Errorf("would_reject = %v, want 5", v)
	}
}

func TestMiddlewareKeyByHeader(t *testing.T) {
	s := newShop(t, nil)
	r := rule("POST /orders", wire.KindTokenBucket)
	r.Rate, r.Burst = 0.01, 1
	r.KeyBy = wire.KeyBy{Source: "header", Name: "X-Tenant", MaxKeys: 10}
	putRule(t, s.cli, "test", r)
	waitRule(t, s.c.Limiter("POST /orders"), 1)
	if resp, _ := s.do(t, "POST", "/orders", "X-Tenant", "a"); resp.StatusCode != http.StatusCreated {
		t.Fatal("tenant a first request rejected")
	}
	if resp, _ := s.do(t, "POST", "/orders", "X-Tenant", "a"); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatal("tenant a second request admitted")
	}
	if resp, _ := s.do(t, "POST", "/orders", "X-Tenant", "b"); resp.StatusCode != http.StatusCreated {
		t.Fatal("tenant b rejected because of tenant a")
	}
}

// TestMiddlewareReadOnly: with an L4 switch on every write is 503
// read_only, never 2xx, and reads still work with the level in context.
func TestMiddlewareReadOnly(t *testing.T) {
	s := newShop(t, nil)
	s.flip(t, "db-readonly", wire.L4, true)
	before := s.calls.Load()
	for _, m := range []string{"POST", "PUT", "PATCH", "DELETE"} {
		path := "/orders"
		if m != "POST" {
			path = "/orders/1"
		}
		resp, body := s.do(t, m, path, "Idempotency-Key", "k1")
		if resp.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("%s under L4: %d, want 503", m, resp.StatusCode)
			continue
		}
		if p := decodeProblem(t, resp, body); p.Reason != ReasonReadOnly {
			t.Errorf("%s: reason %q", m, p.Reason)
		}
	}
	if s.calls.Load() != before {
		t.Error("a write reached the handler under L4")
	}
	resp, _ := s.do(t, "GET", "/orders/1")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("read under L4: %d", resp.StatusCode)
	}
	if lv, _ := s.seen.Load("GET /orders/1"); lv != wire.L4 {
		t.Errorf("handler saw level %v, want L4", lv)
	}
	// L4 wins over L5: no write is accepted.
	s.flip(t, "orders-queue", wire.L5, true)
	if resp, _ := s.do(t, "POST", "/orders", "Idempotency-Key", "k2"); resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("L4+L5 write: %d, want 503", resp.StatusCode)
	}
	s.flip(t, "db-readonly", wire.L4, false)
	s.flip(t, "orders-queue", wire.L5, false)
	if resp, _ := s.do(t, "POST", "/orders"); resp.StatusCode != http.StatusCreated {
		t.Errorf("write after recovery: %d", resp.StatusCode)
	}
	if lv, _ := s.seen.Load("POST /orders"); lv != wire.Level("") {
		t.Errorf("normal request carries level %q", lv)
	}
	if v, _ := series(t, s.reg, "switchyard_sdk_degraded_requests_total", map[string]string{"level": "L4", "action": "rejected"}); v != 5 {
		t.Errorf("degraded rejected = %v, want 5", v)
	}
	if v, _ := series(t, s.reg, "switchyard_sdk_request_duration_seconds", map[string]string{"path": PathDegraded}); v < 6 {
		t.Errorf("degraded latency samples = %v, want ≥ 6", v)
	}
}

// TestMiddlewareQueueWrites: under L5 32 concurrent writes with 4
// idempotency keys make exactly 4 Enqueue calls and all get 202: the
// duplicates of a key wait for its Enqueue call, held until every one of
// them is waiting.
func TestMiddlewareQueueWrites(t *testing.T) {
	const writes, keys = 32, 4
	var enq sync.Map // idempotency key -> *atomic.Int64 Enqueue calls
	block := make(chan struct{})
	release := sync.OnceFunc(func() { close(block) })
	t.Cleanup(release)
	enqueued, waiting := make(chan string, writes), make(chan string, writes)
	s := startShop(t, EnqueuerFunc(func(ctx context.Context, w QueuedWrite) error {
		if DegradedLevel(ctx) != wire.L5 {
			t.Errorf("Enqueue context level = %q", DegradedLevel(ctx))
		}
		n, _ := enq.LoadOrStore(w.Key, new(atomic.Int64))
		n.(*atomic.Int64).Add(1)
		enqueued <- w.Key
		select {
		case <-block:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}), func(g *HTTPGuard) {
		g.idem.testHookWait = func(key string) { waiting <- key }
	})
	s.flip(t, "orders-queue", wire.L5, true)
	resp, body := s.do(t, "POST", "/orders")
	if resp.StatusCode != http.StatusBadRequest || decodeProblem(t, resp, body).Reason != ReasonIdempotencyKeyRequired {
		t.Fatalf("write without key: %d %s", resp.StatusCode, body)
	}
	if resp, _ := s.do(t, "POST", "/orders", "Idempotency-Key", "bad key"); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("invalid key: %d", resp.StatusCode)
	}
	var wg sync.WaitGroup
	for i := range writes {
		wg.Go(func() {
			key := fmt.Sprint("order-", i%keys)
			resp, body := s.do(t, "POST", "/orders", "Idempotency-Key", key)
			if resp.StatusCode != http.StatusAccepted || resp.Header.Get("Idempotency-Key") != key {
				t.Errorf("queued write: %d %v %s", resp.StatusCode, resp.Header, body)
				return
			}
			var got struct{ Status, IdempotencyKey string }
			if err := json.Unmarshal([]byte(body), &struct {
				Status *string `json:"status"`
				Key    *string `json:"idempotency_key"`
			}{&got.Status, &got.IdempotencyKey}); err != nil || got.Status != "queued" || got.IdempotencyKey != key {
				t.Errorf("202 body %q", body)
			}
		})
	}
	deadline := time.After(10 * time.Second)
wait:
	for calls, dups := 0, 0; calls < keys || dups < writes-keys; {
		select {
		case <-enqueued:
			calls++
		case <-waiting:
			dups++
		case <-deadline:
			t.Errorf("after 10s: %d Enqueue calls and %d duplicates waiting, want %d and %d", calls, dups, keys, writes-keys)
			break wait
		}
	}
	release()
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	n := 0
	enq.Range(func(k, v any) bool {
		n++
		if c := v.(*atomic.Int64).Load(); c != 1 {
			t.Errorf("key %v enqueued %d times", k, c)
		}
		return true
	})
	if n != keys {
		t.Errorf("%d keys enqueued, want %d", n, keys)
	}
	// A retry after the fact is answered 202 without a second Enqueue.
	if resp, _ := s.do(t, "POST", "/orders", "Idempotency-Key", "order-0"); resp.StatusCode != http.StatusAccepted {
		t.Errorf("retry: %d", resp.StatusCode)
	}
	if c, _ := enq.Load("order-0"); c.(*atomic.Int64).Load() != 1 {
		t.Error("retry enqueued again")
	}
	// Reads are served with the level in context; writes never reach the handler.
	if resp, _ := s.do(t, "GET", "/orders/1"); resp.StatusCode != http.StatusOK {
		t.Errorf("read under L5: %d", resp.StatusCode)
	}
	if lv, _ := s.seen.Load("GET /orders/1"); lv != wire.L5 {
		t.Errorf("read saw level %v", lv)
	}
	if _, ok := s.seen.Load("POST /orders"); ok {
		t.Error("a queued write reached the handler")
	}
	if v, _ := series(t, s.reg, "switchyard_sdk_degraded_requests_total", map[string]string{"level": "L5", "action": "queued"}); v != 33 {
		t.Errorf("queued = %v, want 33", v)
	}
}

// TestMiddlewareEnqueueInvalidWrite: an Enqueuer refusing a malformed write
// answers 400 invalid_write (not 503, and no detail from the body), and
// the key is free for the corrected retry.
func TestMiddlewareEnqueueInvalidWrite(t *testing.T) {
	var calls atomic.Int64
	s := newShop(t, EnqueuerFunc(func(context.Context, QueuedWrite) error {
		if calls.Add(1) == 1 {
			return fmt.Errorf("%w: count <script>", ErrInvalidWrite)
		}
		return nil
	}))
	s.flip(t, "orders-queue", wire.L5, true)
	resp, body := s.do(t, "POST", "/orders", "Idempotency-Key", "k")
	if resp.StatusCode != http.StatusBadRequest || decodeProblem(t, resp, body).Reason != ReasonInvalidWrite {
		t.Fatalf("invalid write: %d %s", resp.StatusCode, body)
	}
	if strings.Contains(body, "script") {
		t.Errorf("the Enqueuer's error text reached the client: %s", body)
	}
	if resp, _ := s.do(t, "POST", "/orders", "Idempotency-Key", "k"); resp.StatusCode != http.StatusAccepted {
		t.Errorf("corrected retry: %d, want 202", resp.StatusCode)
	}
}

func TestMiddlewareEnqueueFailure(t *testing.T) {
	var calls atomic.Int64
	s := newShop(t, EnqueuerFunc(func(context.Context, QueuedWrite) error {
		if calls.Add(1) == 1 {
			return errors.New("queue down")
		}
		return nil
	}))
	s.flip(t, "orders-queue", wire.L5, true)
	resp, body := s.do(t, "POST", "/orders", "Idempotency-Key", "k")
	if resp.StatusCode != http.StatusServiceUnavailable || decodeProblem(t, resp, body).Reason != ReasonEnqueueFailed {
		t.Fatalf("failed enqueue: %d %s", resp.StatusCode, body)
	}
	// A failure is not remembered: the retry enqueues.
	if resp, _ := s.do(t, "POST", "/orders", "Idempotency-Key", "k"); resp.StatusCode != http.StatusAccepted {
		t.Errorf("retry after failure: %d", resp.StatusCode)
	}
	if calls.Load() != 2 {
		t.Errorf("Enqueue calls = %d, want 2", calls.Load())
	}
}

func TestMiddlewareBreakerOpen(t *testing.T) {
	s := newShop(t, nil)
	r := rule("POST /orders", wire.KindBreaker)
	r.ErrorRate, r.MinRequests, r.Window, r.OpenDuration, r.HalfOpenProbes = 0.5, 3, wire.Duration(time.Minute), wire.Duration(90*time.Second), 1
	putRule(t, s.cli, "test", r)
	waitRule(t, s.c.Limiter("POST /orders"), 1)
	for range 3 {
		if resp, _ := s.do(t, "POST", "/orders?fail=1"); resp.StatusCode != http.StatusInternalServerError {
			t.Fatalf("failing call: %d", resp.StatusCode)
		}
	}
	resp, body := s.do(t, "POST", "/orders")
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("open breaker: %d %s", resp.StatusCode, body)
	}
	if p := decodeProblem(t, resp, body); p.Reason != ReasonBreakerOpen {
		t.Errorf("reason %q", p.Reason)
	}
	if ra := resp.Header.Get("Retry-After"); ra != "90" && ra != "89" {
		t.Errorf("Retry-After = %q, want ≈90", ra)
	}
}

func TestMiddlewareLowerLevelsMarkContext(t *testing.T) {
	s := newShop(t, nil)
	s.flip(t, "recs-off", wire.L3, true)
	if resp, _ := s.do(t, "POST", "/orders"); resp.StatusCode != http.StatusCreated {
		t.Fatalf("write under L3: %d", resp.StatusCode)
	}
	if lv, _ := s.seen.Load("POST /orders"); lv != wire.L3 {
		t.Errorf("level in context %v, want L3", lv)
	}
	if v, _ := series(t, s.reg, "switchyard_sdk_degraded_requests_total", map[string]string{"level": "L3", "action": "served"}); v != 1 {
		t.Errorf("served = %v", v)
	}
}

func TestRouteResource(t *testing.T) {
	for _, tc := range []struct{ method, pattern, path, want string }{
		{"POST", "POST /orders", "/orders", "POST /orders"},
		{"GET", "/search", "/search", "GET /search"},
		{"GET", "example.com/a/{id}", "/a/1", "GET example.com/a/{id}"},
		{"DELETE", "", "/raw/1", "DELETE /raw/1"},
	} {
		r := httptest.NewRequest(tc.method, tc.path, nil)
		r.Pattern = tc.pattern
		if got := RouteResource(r); got != tc.want {
			t.Errorf("RouteResource(%s %q) = %q, want %q", tc.method, tc.pattern, got, tc.want)
		}
	}
}

func TestRetryAfterSeconds(t *testing.T) {
	for d, want := range map[time.Duration]int{0: 1, time.Millisecond: 1, time.Second: 1, 1001 * time.Millisecond: 2, 90 * time.Second: 90} {
		if got := RetryAfterSeconds(d); got != want {
			t.Errorf("RetryAfterSeconds(%v) = %d, want %d", d, got, want)
		}
	}
}

// TestWriteProblemRetryAfter: every 429 and every breaker_open 503 carries
// Retry-After in whole seconds ≥ 1, even when the limiter cannot say when
// (a half-open breaker with its probes taken reports 0).
func TestWriteProblemRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		reason string
		after  time.Duration
		want   string
	}{
		{ReasonRateLimited, 0, "1"},
		{ReasonRateLimited, 1500 * time.Millisecond, "2"},
		{ReasonBreakerOpen, 0, "1"},
		{ReasonBreakerOpen, 90 * time.Second, "90"},
		{ReasonReadOnly, 0, ""},
		{ReasonIdempotencyKeyRequired, 0, ""},
	} {
		rec := httptest.NewRecorder()
		WriteProblem(rec, tc.reason, tc.after)
		if got := rec.Header().Get("Retry-After"); got != tc.want {
			t.Errorf("WriteProblem(%s, %v): Retry-After %q, want %q", tc.reason, tc.after, got, tc.want)
		}
	}
}

func TestProblemVocabulary(t *testing.T) {
	for reason, p := range problems {
		got := ProblemFor(reason)
		if got.Reason != reason || got.Status != p.Status || got.Type != "/problems/"+reason {
			t.Errorf("ProblemFor(%s) = %+v", reason, got)
		}
	}
	if p := ProblemFor("<script>"); p.Reason != "unavailable" || strings.Contains(p.Type, "<") {
		t.Errorf("unknown reason leaks into the problem: %+v", p)
	}
}

func TestDedupeBounded(t *testing.T) {
	d := newDedupe(time.Hour, 3)
	ctx := context.Background()
	calls := 0
	for i := range 10 {
		_ = d.do(ctx, fmt.Sprint(i), func() error { calls++; return nil })
	}
	if len(d.m) > 3 || len(d.order) > 3 {
		t.Errorf("dedupe keeps %d keys (%d ordered), cap 3", len(d.m), len(d.order))
	}
	_ = d.do(ctx, "9", func() error { calls++; return nil })
	if calls != 10 {
		t.Errorf("calls = %d, want 10 (recent key remembered)", calls)
	}
}

// TestMiddlewareWaitCutShortIsNotSuccess: a GCRA rule asks a write to wait;
// when the request's context ends first the handler never ran, and the
// answer must say so (429), never an empty 200.
func TestMiddlewareWaitCutShortIsNotSuccess(t *testing.T) {
	s := newShop(t, nil)
	r := rule("POST /orders", wire.KindGCRA)
	r.Rate, r.MaxWait = 1, wire.Duration(5*time.Second) // the 2nd request waits ~1 s
	putRule(t, s.cli, "test", r)
	waitRule(t, s.c.Limiter("POST /orders"), 1)
	if resp, _ := s.do(t, "POST", "/orders"); resp.StatusCode != http.StatusCreated {
		t.Fatalf("first request: %d", resp.StatusCode)
	}
	calls := s.calls.Load()
	rec := httptest.NewRecorder()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	req := httptest.NewRequestWithContext(ctx, "POST", "/orders", strings.NewReader(`{}`))
	req.Pattern = "POST /orders"
	s.c.HTTPGuard(MiddlewareOptions{}).Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.calls.Add(1)
		w.WriteHeader(http.StatusCreated)
	})).ServeHTTP(rec, req)
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("cut-short wait answered %d (Retry-After %q): %s", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}
	if s.calls.Load() != calls {
		t.Fatal("the handler ran although the wait was cut short")
	}
}

// TestMiddlewareQueueClientErrorsDoNotTripBreaker: under L5, writes
// refused for a missing Idempotency-Key are the client's fault (400) and
// must not count as failures of the resource's breaker.
func TestMiddlewareQueueClientErrorsDoNotTripBreaker(t *testing.T) {
	s := newShop(t, nil)
	r := rule("POST /orders", wire.KindBreaker)
	r.ErrorRate, r.MinRequests, r.Window, r.OpenDuration, r.HalfOpenProbes = 0.5, 3, wire.Duration(time.Minute), wire.Duration(time.Minute), 1
	putRule(t, s.cli, "test", r)
	waitRule(t, s.c.Limiter("POST /orders"), 1)
	s.flip(t, "orders-queue", wire.L5, true)
	for range 5 {
		if resp, _ := s.do(t, "POST", "/orders"); resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("write without key: %d", resp.StatusCode)
		}
	}
	if resp, body := s.do(t, "POST", "/orders", "Idempotency-Key", "k1"); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("keyed write after 5 keyless ones: %d %s, want 202", resp.StatusCode, body)
	}
	if v, _ := series(t, s.reg, "switchyard_sdk_degraded_requests_total", map[string]string{"level": "L5", "action": "rejected"}); v != 5 {
		t.Errorf("rejected = %v, want 5", v)
	}
}

// TestMiddlewareStreamingBehindConcurrencyRule: a handler that streams and
// asserts http.Flusher keeps working when the resource has a rule whose
// outcome the middleware tracks (its ResponseWriter is wrapped then).
func TestMiddlewareStreamingBehindConcurrencyRule(t *testing.T) {
	s := newShop(t, nil)
	r := rule("GET /events", wire.KindConcurrency)
	r.Max = 4
	putRule(t, s.cli, "test", r)
	waitRule(t, s.c.Limiter("GET /events"), 1)
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/events", nil)
	req.Pattern = "GET /events"
	s.c.HTTPGuard(MiddlewareOptions{}).Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, ok := w.(http.Flusher)
		if !ok {
			http.Error(w, "streaming unsupported", http.StatusInternalServerError)
			return
		}
		io.WriteString(w, "data: 1\n\n")
		f.Flush()
	})).ServeHTTP(rec, req)
	if rec.Code != http.StatusOK || !rec.Flushed {
		t.Fatalf("streaming handler answered %d (flushed %v): %s", rec.Code, rec.Flushed, rec.Body)
	}
}
