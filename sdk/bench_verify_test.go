package sdk

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/switchyard-io/switchyard/sdk/wire"
)

// discardWriter is a ResponseWriter that keeps nothing, so the middleware
// benchmarks measure the middleware, not a recorder.
type discardWriter struct{ h http.Header }

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (d *discardWriter) WriteHeader(int)             {}

// benchMiddleware serves requests of method through the middleware
// guarding an off switch, with the off L1 switch "recs" (required fields
// and a JSON Schema) listed for verification when verify is set; no
// sample is due (as between two samples).
func benchMiddleware(b *testing.B, verify bool, method string) {
	c := benchClient(b, 100, wire.StickyInstance)
	recs := mkSwitch("checkout", "recs", wire.StateOff, 100)
	recs.Level, recs.Fallback = wire.L1, []byte(`[]`)
	recs.Verify = &wire.Verify{RequiredFields: []string{"/0/sku"}, Schema: []byte(`{"type":"array","items":{"required":["sku"]}}`)}
	publishLive(b, c, 2, []*wire.Switch{recs})
	opts := MiddlewareOptions{Switches: []*Handle{c.Switch(benchOff)}}
	if verify {
		h := c.Switch("recs")
		h.sig.verifyState().nextAt.Store(math.MaxInt64)
		opts.Verify = []*Handle{h}
	}
	body := []byte(`{"ok":true}`)
	srv := c.Middleware(opts)(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write(body) }))
	w := &discardWriter{h: http.Header{}}
	r := httptest.NewRequest(method, "/products/7", nil)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		srv.ServeHTTP(w, r)
	}
}

// BenchmarkMiddleware is the baseline of BenchmarkMiddlewareVerify.
func BenchmarkMiddleware(b *testing.B) { benchMiddleware(b, false, http.MethodGet) }

// BenchmarkMiddlewareWrite is BenchmarkMiddleware for writes (POST), which
// also pass the L4 warm-up check: with no warm-up in progress, one atomic
// load (warmup.go).
func BenchmarkMiddlewareWrite(b *testing.B) { benchMiddleware(b, false, http.MethodPost) }

// BenchmarkMiddlewareVerify is the middleware on an unsampled request with
// shadow verification enabled: target ≤ 1.05× BenchmarkMiddleware, no
// extra allocation.
func BenchmarkMiddlewareVerify(b *testing.B) { benchMiddleware(b, true, http.MethodGet) }

// keyList is n distinct tenant keys with a prefix.
func keyList(prefix string, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s-%05d", prefix, i)
	}
	return keys
}

// listedSwitch is the benchmark switch benchOff with key stickiness and
// 10,000-key include and exclude lists.
func listedSwitch() *wire.Switch {
	sw := mkSwitch("checkout", benchOff, wire.StateOn, 50)
	sw.Rollout.Stickiness = wire.StickyKey
	sw.Rollout.Include, sw.Rollout.Exclude = keyList("vip", wire.MaxListKeys), keyList("audit", wire.MaxListKeys)
	return sw
}

// BenchmarkSwitchOnKeyLists is BenchmarkSwitchOnKey with 10,000-key
// include and exclude lists on the switch, for a key in neither (the
// lookup then the hash): target ≤ 1.2× BenchmarkSwitchOnKey.
func BenchmarkSwitchOnKeyLists(b *testing.B) {
	c := benchClient(b, 100, wire.StickyKey)
	publishLive(b, c, 2, []*wire.Switch{listedSwitch()})
	h := c.Switch(benchOff)
	ctx := WithKey(context.Background(), "tenant-42")
	if !h.On(WithKey(ctx, "vip-00042")) || h.On(WithKey(ctx, "audit-00042")) {
		b.Fatal("lists not applied")
	}
	b.ReportAllocs()
	b.ResetTimer()
	var on bool
	for i := 0; i < b.N; i++ {
		on = h.On(ctx)
	}
	sink = on
}

// BenchmarkDecodeSwitchKeyLists decodes a published switch with two
// 10,000-key lists and builds its entry (the lookup set), as an SDK does
// per change; value_bytes is the published value's size.
func BenchmarkDecodeSwitchKeyLists(b *testing.B) {
	value := []byte(mustJSON(b, listedSwitch()))
	match := selectorMatcher(nil)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sw, err := decodeSwitch(value)
		if err != nil {
			b.Fatal(err)
		}
		if e := buildEntry(sw, SourceLive, "inst-7", match); e.listed.len() != 2*wire.MaxListKeys {
			b.Fatal("lists not built")
		}
	}
	b.ReportMetric(float64(len(value)), "value_bytes") // after ResetTimer, which drops reported metrics
}
