package sdk

import (
	"context"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-io/switchyard/sdk/limit"
	"github.com/switchyard-io/switchyard/sdk/wire"
)

// TestOverloadLeversThroughTheSDK publishes one rule of each overload
// lever to a real etcd and drives it through the SDK's wrappers.
func TestOverloadLeversThroughTheSDK(t *testing.T) {
	reg := prometheus.NewRegistry()
	c, cli := etcdClient(t, Config{Registerer: reg})

	t.Run("priorities from the criticality header", func(t *testing.T) {
		l := c.Limiter("GET /feed")
		r := rule("GET /feed", wire.KindConcurrency)
		r.Max, r.Reserve = 10, 0.2 // sheddable up to 6 in flight, degradable 8, critical 10
		putRule(t, cli, "test", r)
		waitRule(t, l, 1)

		release := make(chan struct{})
		var entered sync.WaitGroup
		h := c.Middleware(MiddlewareOptions{Resource: func(*http.Request) string { return "GET /feed" }})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			entered.Done()
			<-release
		}))
		serve := func(crit string) *httptest.ResponseRecorder {
			req := httptest.NewRequest(http.MethodGet, "/feed", nil)
			if crit != "" {
				req.Header.Set(CriticalityHeader, crit)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			return rec
		}
		var done sync.WaitGroup
		hold := func(crit string, n int) {
			entered.Add(n)
			for range n {
				done.Go(func() { serve(crit) })
			}
			entered.Wait()
		}
		hold("sheddable", 6)
		if rec := serve("sheddable"); rec.Code != http.StatusTooManyRequests {
			t.Errorf("7th sheddable request: %d, want 429 (its share is 6 of 10)", rec.Code)
		}
		hold("degradable", 2)
		if rec := serve("degradable"); rec.Code != http.StatusTooManyRequests {
			t.Errorf("9th request, degradable: %d, want 429 (its share is 8 of 10)", rec.Code)
		}
		hold("", 2) // no header: critical
		if rec := serve("critical"); rec.Code != http.StatusTooManyRequests {
			t.Errorf("11th request: %d, want 429 at max", rec.Code)
		}
		close(release)
		done.Wait()
	})

	t.Run("client-side throttling on the round-tripper", func(t *testing.T) {
		clock := limit.NewFakeClock()
		l := c.Limiter("payments-api", LimitClock(clock))
		r := rule("payments-api", wire.KindThrottle)
		r.K, r.MinRequests = 2, 10
		putRule(t, cli, "test", r)
		waitRule(t, l, 1)

		var seen atomic.Int64
		var crit atomic.Value
		backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			seen.Add(1)
			crit.Store(r.Header.Get(CriticalityHeader))
			w.WriteHeader(http.StatusServiceUnavailable) // overloaded: refuses everything
		}))
		defer backend.Close()
		hc := &http.Client{Transport: c.RoundTripper("payments-api", nil)}
		ctx := WithCriticality(context.Background(), Sheddable)
		const calls = 200
		var throttled int
		for range calls {
			clock.Advance(10 * time.Millisecond)
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, backend.URL, nil)
			resp, err := hc.Do(req)
			var re *RejectError
			switch {
			case errors.As(err, &re):
				if !errors.Is(err, limit.ErrLimited) || re.Decision.Reason != limit.ReasonThrottled {
					t.Fatalf("rejection %v, want throttled and errors.Is ErrLimited", err)
				}
				throttled++
			case err != nil:
				t.Fatal(err)
			default:
				resp.Body.Close()
			}
		}
		// With nothing accepted, p = n/(n+1) after min_requests: the
		// backend sees about min_requests + ln(calls/min_requests) calls.
		if n := seen.Load(); n > 30 || int(n)+throttled != calls {
			t.Errorf("backend saw %d of %d calls (%d throttled), want at most 30", n, calls, throttled)
		}
		if got := crit.Load(); got != "sheddable" {
			t.Errorf("backend saw %s %q, want the caller's sheddable", CriticalityHeader, got)
		}
		if s := l.signal(); s.Rejected != uint64(throttled) {
			t.Errorf("fleet signal rejected = %d, want the %d throttled calls", s.Rejected, throttled)
		}
		labels := map[string]string{"resource": "payments-api", "decision": DecisionRejected, "reason": "throttled"}
		if v, _ := series(t, reg, "switchyard_sdk_limit_decisions_total", labels); v != float64(throttled) {
			t.Errorf("decisions_total{reason=throttled} = %v, want %d", v, throttled)
		}
	})

	t.Run("a shadow throttle sends every call and counts what it would refuse", func(t *testing.T) {
		clock := limit.NewFakeClock()
		l := c.Limiter("ledger-api", LimitClock(clock))
		r := rule("ledger-api", wire.KindThrottle)
		r.Mode = wire.ModeShadow
		putRule(t, cli, "test", r)
		waitRule(t, l, 1)
		var seen atomic.Int64
		backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if seen.Add(1)%5 >= 2 {
				w.WriteHeader(http.StatusTooManyRequests) // accepts 40 %
			}
		}))
		defer backend.Close()
		hc := &http.Client{Transport: c.RoundTripper("ledger-api", nil)}
		for range 300 {
			clock.Advance(10 * time.Millisecond)
			resp, err := hc.Get(backend.URL)
			if err != nil {
				t.Fatalf("shadow mode refused a call: %v", err)
			}
			resp.Body.Close()
		}
		s := l.signal()
		if seen.Load() != 300 || s.Rejected != 0 {
			t.Errorf("backend saw %d of 300, %d rejected; want all sent, none rejected", seen.Load(), s.Rejected)
		}
		// Every call is sent and its outcome counted, so the probability
		// is the formula's for a backend accepting 40 %: (1 − 2·0.4) = 20 %
		// of calls would be refused (not more, as it would if the calls it
		// would refuse were not counted when accepted).
		if share := float64(s.ShadowRejected) / 300; share < 0.08 || share > 0.32 {
			t.Errorf("shadow rejected %d of 300 calls (%.0f %%), want about 20 %%", s.ShadowRejected, 100*share)
		}
	})

	t.Run("system protection in the middleware", func(t *testing.T) {
		clock := limit.NewFakeClock()
		cpu := &testCPU{}
		l := c.Limiter("POST /render", LimitClock(clock), LimitCPU(cpu))
		r := rule("POST /render", wire.KindSystem)
		r.CPU = 0.8
		putRule(t, cli, "test", r)
		waitRule(t, l, 1)
		h := c.Middleware(MiddlewareOptions{Resource: func(*http.Request) string { return "POST /render" }})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			clock.Advance(10 * time.Millisecond)
		}))
		serve := func() int {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/render", nil))
			return rec.Code
		}
		for range 50 { // history: one at a time, 10 ms each
			if code := serve(); code != http.StatusOK {
				t.Fatalf("warm-up request: %d", code)
			}
			clock.Advance(100 * time.Millisecond)
		}
		cpu.set(0.95)
		// One request in flight is within Little's law (≈ 1); a second is not.
		p, d := l.Admit(context.Background())
		if !d.OK {
			t.Fatalf("first request under high CPU: %+v", d)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/render", nil))
		if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" {
			t.Errorf("second request under high CPU: %d (Retry-After %q), want 503 overloaded with Retry-After", rec.Code, rec.Header().Get("Retry-After"))
		}
		p.Done(nil)
		if s := l.signal(); s.Rejected != 1 {
			t.Errorf("fleet signal rejected = %d, want 1", s.Rejected)
		}
	})

	t.Run("CoDel queue in the middleware", func(t *testing.T) {
		clock := limit.NewFakeClock()
		l := c.Limiter("POST /export", LimitClock(clock))
		r := rule("POST /export", wire.KindConcurrency)
		r.Max, r.QueueTarget = 1, wire.Duration(5*time.Millisecond)
		putRule(t, cli, "test", r)
		waitRule(t, l, 1)
		if !l.Queues() {
			t.Fatal("a concurrency rule with queue_target does not queue")
		}
		release := make(chan struct{})
		h := c.Middleware(MiddlewareOptions{Resource: func(*http.Request) string { return "POST /export" }})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			<-release
		}))
		codes := make(chan int, 2)
		for range 2 {
			go func() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/export", nil))
				codes <- rec.Code
			}()
		}
		waitFor(t, 10*time.Second, "one request in flight, one queued", func() bool {
			lim := l.cur.Load().lim.(*limit.Concurrency)
			return lim.InFlight() == 1 && lim.Queued() == 1
		})
		clock.Advance(101 * time.Millisecond) // past the queue's bound of one interval
		if code := <-codes; code != http.StatusServiceUnavailable {
			t.Errorf("queued request past its bound: %d, want 503 queue_timeout", code)
		}
		close(release)
		if code := <-codes; code != http.StatusOK {
			t.Errorf("request in flight: %d", code)
		}
	})
}

type testCPU struct{ v atomic.Uint64 }

func (c *testCPU) set(u float64)     { c.v.Store(math.Float64bits(u)) }
func (c *testCPU) CPUUsage() float64 { return math.Float64frombits(c.v.Load()) }
