package console_test

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// BenchmarkFlip measures an on/off flip through the HTTP API, committed to
// Postgres and published to embedded etcd before the response, and
// reports the latency percentiles.
func BenchmarkFlip(b *testing.B) {
	e := newEnv(b)
	c := e.start()
	waitLeader(b, c)
	mustStatus(b, call(b, c, "POST", "/api/v1/apps/checkout/switches", adminToken, `{"name":"bench","level":"L3","reason":"bench"}`), 201)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		op := "on"
		if i%2 == 1 {
			op = "off"
		}
		start := time.Now()
		r := call(b, c, "POST", "/api/v1/apps/checkout/switches/bench/"+op, adminToken, fmt.Sprintf(`{"reason":"flip %d"}`, i))
		lat = append(lat, time.Since(start))
		if r.Status != 200 || r.str("published") != "true" {
			b.Fatalf("flip %d: %d %s", i, r.Status, r.Raw)
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[int(float64(len(lat)-1)*p)]) / float64(time.Millisecond)
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}
