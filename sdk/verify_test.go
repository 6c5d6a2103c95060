package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/sdk/wire"
)

// TestShapeDiffs: types, key sets both ways, nulls, arrays by their first
// elements, required pointers; differences name paths and types only.
func TestShapeDiffs(t *testing.T) {
	for _, tc := range []struct {
		name, live, degraded string
		required             []string
		want                 []string
	}{
		{"same shape, other values", `{"a":1,"b":["x"],"c":{"d":true}}`, `{"a":2,"b":["y","z"],"c":{"d":false}}`, nil, nil},
		{"empty list", `{"items":[{"sku":"s"}]}`, `{"items":[]}`, nil, nil},
		{"null matches any type", `{"a":null,"b":"x"}`, `{"a":{"x":1},"b":null}`, nil, nil},
		{"missing and unexpected keys", `{"a":1,"b":2}`, `{"b":2,"c":3}`, nil, []string{"/a: missing", "/c: unexpected"}},
		{"type changed deep", `{"items":[{"price":3}]}`, `{"items":[{"price":"3"}]}`, nil, []string{"/items/0/price: number, degraded string"}},
		{"document type", `{"a":1}`, `[1]`, nil, []string{"(document): object, degraded array"}},
		{"escaped member names", `{"a/b":{"m~n":1}}`, `{"a/b":{}}`, nil, []string{"/a~1b/m~0n: missing"}},
		{"required field lost in an empty list", `{"items":[{"price":3}]}`, `{"items":[]}`, []string{"/items/0/price"}, []string{"/items/0/price: required, missing"}},
		{"required field absent from live too", `{"items":[]}`, `{"items":[]}`, []string{"/items/0/price"}, nil},
		{"values never leak", `{"secret":"hunter2"}`, `{"secret":42}`, nil, []string{"/secret: string, degraded number"}},
	} {
		lv, ok1 := decodeJSON([]byte(tc.live))
		dv, ok2 := decodeJSON([]byte(tc.degraded))
		if !ok1 || !ok2 {
			t.Fatalf("%s: test JSON does not decode", tc.name)
		}
		var req []wire.Pointer
		for _, s := range tc.required {
			p, err := wire.ParsePointer(s)
			if err != nil {
				t.Fatal(err)
			}
			req = append(req, p)
		}
		var got []string
		for _, d := range shapeDiffs(lv, dv, req, wire.MaxVerifyDiffs) {
			got = append(got, d.String())
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: diffs %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestVerifyIgnoresNoise: a member that two live answers already
// disagree on (an optional promo) is noise, not a mismatch; a required
// field stays one.
func TestVerifyIgnoresNoise(t *testing.T) {
	c := newTestClient(t, Config{InstanceID: "inst-1"})
	publishLive(t, c, 1, []*wire.Switch{l1("promo", `{}`, nil), l1("promo-required", `{}`, &wire.Verify{RequiredFields: []string{"/promo"}})})
	type page struct {
		Items []string `json:"items"`
		Promo *struct {
			Code string `json:"code"`
		} `json:"promo,omitempty"`
	}
	for _, tc := range []struct {
		name      string
		mismatch  uint64
		liveCalls int
	}{{"promo", 0, 2}, {"promo-required", 1, 2}} {
		h := c.Switch(tc.name)
		calls := 0
		live := func(context.Context) (page, error) {
			calls++
			p := page{Items: []string{"socks"}}
			if calls == 1 { // the caller's answer has a promo, the second live answer none
				p.Promo = &struct {
					Code string `json:"code"`
				}{"XMAS"}
			}
			return p, nil
		}
		if _, err := Verify(context.Background(), h, live, func(context.Context) (page, error) { return page{Items: []string{}}, nil }); err != nil {
			t.Fatal(err)
		}
		s := verified(t, h, 1)
		if s.Mismatch != tc.mismatch || s.Match != 1-tc.mismatch || calls != tc.liveCalls {
			t.Errorf("%s: signal %+v after %d live calls; want %d mismatches after %d", tc.name, s, calls, tc.mismatch, tc.liveCalls)
		}
	}
}

// pageService is a demo-like service: GET /products/{id} lists
// recommendations from a (pretend) live service, or the L1 switch's
// fallback payload while the switch is on for the request. degraded, when
// set, replaces the fallback path (to panic or hang in tests).
type pageService struct {
	recs     *Handle
	srv      *httptest.Server
	degraded func(w http.ResponseWriter, r *http.Request)
	liveRuns atomic.Int64
	degRuns  atomic.Int64
}

const livePage = `{"id":"7","currency":"EUR","recommendations":[{"sku":"socks","price":3}]}`

func newPageService(t *testing.T, c *Client, name string) *pageService {
	t.Helper()
	p := &pageService{recs: c.Switch(name)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /products/{id}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if !p.recs.On(r.Context()) {
			p.liveRuns.Add(1)
			io.WriteString(w, livePage)
			return
		}
		p.degRuns.Add(1)
		if p.degraded != nil {
			p.degraded(w, r)
			return
		}
		var fb json.RawMessage
		if err := p.recs.Fallback(&fb); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		io.WriteString(w, `{"id":"`+r.PathValue("id")+`",`+string(fb[1:]))
	})
	p.srv = httptest.NewServer(c.Middleware(MiddlewareOptions{Mux: mux, Verify: []*Handle{p.recs}})(mux))
	t.Cleanup(p.srv.Close)
	return p
}

// get fetches a product page and checks the caller got the live answer,
// byte for byte.
func (p *pageService) get(t *testing.T) {
	t.Helper()
	res, err := http.Get(p.srv.URL + "/products/7")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || string(body) != livePage {
		t.Fatalf("caller got %d %s, want 200 %s", res.StatusCode, body, livePage)
	}
}

// l1 is an off L1 switch whose fallback is the page without id (the
// handler adds it).
func l1(name, fallback string, verify *wire.Verify) *wire.Switch {
	sw := mkSwitch("checkout", name, wire.StateOff, 100)
	sw.Level, sw.Fallback, sw.Verify = wire.L1, json.RawMessage(fallback), verify
	return sw
}

// verified waits until the switch's shadow runs have settled (none
// executing) with at least n outcomes, and returns its signal.
func verified(t *testing.T, h *Handle, n uint64) *wire.VerifySignal {
	t.Helper()
	var s *wire.VerifySignal
	waitFor(t, 10*time.Second, "shadow verification outcomes", func() bool {
		s = h.sig.verifyState().signal()
		return s != nil && s.Match+s.Mismatch+s.Error+s.Timeout >= n && !h.sig.verifyState().busy.Load()
	})
	return s
}

// TestMiddlewareVerify is the demo of shadow verification: a correct
// fallback matches, a fallback that lost a field is a mismatch naming the
// path, a degraded path that panics or outlives its timeout is counted;
// every caller gets the live answer, unchanged, and the switch's degraded
// and fallback counters do not move.
func TestMiddlewareVerify(t *testing.T) {
	c := newTestClient(t, Config{InstanceID: "inst-1"})
	good := `{"currency":"EUR","recommendations":[]}`
	lost := `{"recommendations":[{"sku":"socks"}]}`
	publishLive(t, c, 1, []*wire.Switch{
		l1("recs-good", good, nil),
		l1("recs-lost", lost, &wire.Verify{RequiredFields: []string{"/currency"}}),
		l1("recs-panic", good, nil),
		l1("recs-slow", good, &wire.Verify{Timeout: wire.Duration(50 * time.Millisecond)}),
	})

	t.Run("correct fallback matches", func(t *testing.T) {
		p := newPageService(t, c, "recs-good")
		p.get(t)
		s := verified(t, p.recs, 1)
		if s.Match != 1 || s.Mismatch+s.Error+s.Timeout != 0 || s.LastMatch == 0 || s.Diffs != nil {
			t.Errorf("signal %+v, want one match", s)
		}
		p.get(t) // within the period: not sampled
		if p.degRuns.Load() != 1 || p.liveRuns.Load() != 2 {
			t.Errorf("degraded runs %d, live runs %d; want 1 and 2", p.degRuns.Load(), p.liveRuns.Load())
		}
	})
	t.Run("lost field is a mismatch naming the path", func(t *testing.T) {
		p := newPageService(t, c, "recs-lost")
		p.get(t)
		s := verified(t, p.recs, 1)
		want := []string{"/currency: required, missing", "/recommendations/0/price: missing"}
		if s.Mismatch != 1 || s.Match != 0 || !slices.Equal(s.Diffs, want) || s.LastMismatch == 0 {
			t.Errorf("signal %+v, want one mismatch with diffs %q", s, want)
		}
	})
	t.Run("panic is counted", func(t *testing.T) {
		p := newPageService(t, c, "recs-panic")
		p.degraded = func(http.ResponseWriter, *http.Request) { panic("fallback bug") }
		p.get(t)
		if s := verified(t, p.recs, 1); s.Error != 1 || s.Match+s.Mismatch != 0 {
			t.Errorf("signal %+v, want one error", s)
		}
	})
	t.Run("timeout is counted", func(t *testing.T) {
		p := newPageService(t, c, "recs-slow")
		release := make(chan struct{})
		p.degraded = func(w http.ResponseWriter, r *http.Request) {
			<-release // ignores its context, like a stuck dependency call
			io.WriteString(w, livePage)
		}
		start := time.Now()
		p.get(t)
		waitFor(t, 10*time.Second, "the timeout", func() bool { return p.recs.sig.verifyState().timeouts.Load() == 1 })
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("timeout counted after %v", took)
		}
		p.recs.sig.verifyState().nextAt.Store(0) // due again, but the stuck run holds the switch
		p.get(t)
		if p.degRuns.Load() != 1 {
			t.Errorf("%d degraded runs while one is stuck, want 1", p.degRuns.Load())
		}
		close(release)
		s := verified(t, p.recs, 1)
		if s.Timeout != 1 || s.Match+s.Mismatch+s.Error != 0 || s.Latency != nil {
			t.Errorf("signal %+v, want one timeout and no finished run", s)
		}
	})
	for _, name := range []string{"recs-good", "recs-lost", "recs-panic", "recs-slow"} {
		sig := c.Switch(name).sig.signal()
		if sig.Degraded != 0 || sig.Fallbacks != 0 {
			t.Errorf("%s: degraded %d, fallbacks %d counted for shadow runs", name, sig.Degraded, sig.Fallbacks)
		}
	}
}

// TestVerifyOnlyWhenOffAndSafe: no sample for a switch that is on, of
// level L3–L5, disabled, for a write, or for a live answer that is not a
// 2xx JSON document.
func TestVerifyOnlyWhenOffAndSafe(t *testing.T) {
	c := newTestClient(t, Config{InstanceID: "inst-1"})
	on := l1("on", `{}`, nil)
	on.State = wire.StateOn
	l3 := mkSwitch("checkout", "l3", wire.StateOff, 100)
	publishLive(t, c, 1, []*wire.Switch{on, l3, l1("disabled", `{}`, &wire.Verify{Disabled: true}), l1("l1", `{}`, nil)})
	degradedRuns := 0
	handler := func(name string, status int, body string) http.Handler {
		h := c.Switch(name)
		return c.Middleware(MiddlewareOptions{Verify: []*Handle{h}})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if verifying(r.Context(), h.sig) {
				degradedRuns++
			}
			w.WriteHeader(status)
			io.WriteString(w, body)
		}))
	}
	for _, tc := range []struct {
		name, method string
		status       int
		body         string
	}{
		{"on", http.MethodGet, 200, `{}`},
		{"l3", http.MethodGet, 200, `{}`},
		{"disabled", http.MethodGet, 200, `{}`},
		{"l1", http.MethodPost, 200, `{}`},
		{"l1", http.MethodGet, 404, `{}`},
		{"l1", http.MethodGet, 200, `not json`},
	} {
		h := c.Switch(tc.name)
		h.sig.verifyState().nextAt.Store(0)
		rec := httptest.NewRecorder()
		handler(tc.name, tc.status, tc.body).ServeHTTP(rec, httptest.NewRequest(tc.method, "/x", strings.NewReader("")))
		if rec.Code != tc.status || rec.Body.String() != tc.body {
			t.Errorf("%s %s: caller got %d %q", tc.method, tc.name, rec.Code, rec.Body)
		}
		waitFor(t, 10*time.Second, "the sample to settle", func() bool { return !h.sig.verifyState().busy.Load() })
		if h.sig.verifyState().signal() != nil {
			t.Errorf("%s %s %d %q: sampled", tc.method, tc.name, tc.status, tc.body)
		}
	}
	if degradedRuns != 0 {
		t.Errorf("%d degraded runs", degradedRuns)
	}
}

// TestVerifyHelper: sdk.Verify returns live's result whatever degraded
// does; degraded sees the switch on; a mismatch, an error and a live
// failure are told apart.
func TestVerifyHelper(t *testing.T) {
	c := newTestClient(t, Config{InstanceID: "inst-1"})
	publishLive(t, c, 1, []*wire.Switch{l1("prices", `{}`, nil)})
	h := c.Switch("prices")
	type quote struct {
		SKU   string  `json:"sku"`
		Price float64 `json:"price"`
	}
	live := func(context.Context) (quote, error) { return quote{"socks", 3}, nil }
	call := func(degraded func(context.Context) (quote, error)) {
		t.Helper()
		h.sig.verifyState().nextAt.Store(0)
		got, err := Verify(context.Background(), h, live, degraded)
		if err != nil || got != (quote{"socks", 3}) {
			t.Fatalf("Verify = %v, %v; want live's result", got, err)
		}
	}
	var sawOn atomic.Bool
	call(func(ctx context.Context) (quote, error) {
		sawOn.Store(h.On(ctx) && DegradedLevel(ctx) == wire.L1)
		return quote{"cached", 0}, nil
	})
	if s := verified(t, h, 1); s.Match != 1 || !sawOn.Load() {
		t.Errorf("signal %+v, degraded saw the switch on: %v", s, sawOn.Load())
	}
	if h.On(context.Background()) {
		t.Error("the switch answers on outside the degraded run")
	}
	call(func(context.Context) (quote, error) { return quote{}, errors.New("cache down") })
	if s := verified(t, h, 2); s.Error != 1 {
		t.Errorf("signal %+v, want an error", s)
	}
	h.sig.verifyState().nextAt.Store(0)
	if _, err := Verify(context.Background(), h, func(context.Context) (quote, error) { return quote{}, io.EOF },
		func(context.Context) (quote, error) { panic("not called") }); !errors.Is(err, io.EOF) {
		t.Errorf("live's error = %v, want EOF", err)
	}
	if h.sig.verifyState().busy.Load() {
		t.Error("a failed live call left a sample running")
	}
}

// TestMiddlewareVerifySchema: with a JSON Schema on the switch, a
// fallback whose shape matches the live answer but violates the schema
// (a price that turned null) is a mismatch naming the path and keyword,
// never the value, while callers get the live answer byte for byte; a
// fallback that satisfies it matches. The schema is compiled once per
// schema, not per sample.
func TestMiddlewareVerifySchema(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","required":["currency","recommendations"],
		"properties":{"currency":{"type":"string"},"recommendations":{"type":"array","items":{"$ref":"#/$defs/rec"}}},
		"$defs":{"rec":{"type":"object","required":["sku","price"],"properties":{"price":{"type":"number","minimum":0}}}}}`)
	c := newTestClient(t, Config{InstanceID: "inst-1"})
	publishLive(t, c, 1, []*wire.Switch{
		l1("recs-null-price", `{"currency":"EUR","recommendations":[{"sku":"socks","price":null}]}`, &wire.Verify{Schema: schema}),
		l1("recs-schema-good", `{"currency":"EUR","recommendations":[{"sku":"socks","price":0}]}`, &wire.Verify{Schema: schema}),
	})

	bad := newPageService(t, c, "recs-null-price")
	bad.get(t)
	s := verified(t, bad.recs, 1)
	want := []string{"/recommendations/0/price: schema type"}
	if s.Mismatch != 1 || s.Match != 0 || !slices.Equal(s.Diffs, want) {
		t.Errorf("signal %+v, want one mismatch with diffs %q", s, want)
	}

	good := newPageService(t, c, "recs-schema-good")
	v := good.recs.sig.verifyState()
	for i := range 3 {
		v.nextAt.Store(0) // every request is sampled
		good.get(t)
		if s := verified(t, good.recs, uint64(i+1)); s.Match != uint64(i+1) || s.Mismatch != 0 {
			t.Fatalf("sample %d: signal %+v, want only matches", i+1, s)
		}
	}
	if v.compiles != 1 {
		t.Errorf("schema compiled %d times for 3 samples, want once", v.compiles)
	}

	// A new revision with another schema is compiled once more; the
	// fallback's 0 price now violates it.
	stricter := json.RawMessage(`{"properties":{"recommendations":{"items":{"properties":{"price":{"exclusiveMinimum":0}}}}}}`)
	publishLive(t, c, 2, []*wire.Switch{l1("recs-schema-good", `{"currency":"EUR","recommendations":[{"sku":"socks","price":0}]}`, &wire.Verify{Schema: stricter})})
	v.nextAt.Store(0)
	good.get(t)
	s = verified(t, good.recs, 4)
	if want := []string{"/recommendations/0/price: schema exclusiveMinimum"}; s.Mismatch != 1 || !slices.Equal(s.Diffs, want) || v.compiles != 2 {
		t.Errorf("after a new schema: signal %+v, %d compiles; want one mismatch %q and 2 compiles", s, v.compiles, want)
	}
}
