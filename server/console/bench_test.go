package console_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/pgtest"
	"github.com/switchyard-io/switchyard/server/console"
)

// BenchmarkFlip measures an on/off flip through the HTTP API, committed to
// Postgres and published to embedded etcd before the response, and
// reports the latency percentiles.
func BenchmarkFlip(b *testing.B) {
	e := newEnv(b)
	c := e.start()
	waitLeader(b, c)
	createBenchSwitch(b, c)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		lat = append(lat, flip(b, c, i))
	}
	b.StopTimer()
	b.ReportMetric(percentile(lat, 0.50), "p50-ms")
	b.ReportMetric(percentile(lat, 0.99), "p99-ms")
}

// BenchmarkFlipAuditTree is BenchmarkFlip with the audit log's Merkle tree
// against its baseline in the same run: two consoles, on databases of
// their own, one appending each event to the chain and the tree, the other
// to the chain only (console.WithoutAuditTree), flipped in turn so both
// see the same machine. It reports both p99s and tree/chain, the ratio
// the target (≤ 1.1) is about.
func BenchmarkFlipAuditTree(b *testing.B) {
	e := newEnv(b)
	tree := e.start(func(cfg *console.Config) { cfg.Namespace = "tree" })
	chainURL := pgtest.NewDatabase(b)
	chain := e.startWith([]console.Option{console.WithoutAuditTree()}, func(cfg *console.Config) {
		cfg.Namespace, cfg.DatabaseURL = "chain", chainURL
	})
	waitLeader(b, tree)
	waitLeader(b, chain)
	createBenchSwitch(b, tree)
	createBenchSwitch(b, chain)
	withTree := make([]time.Duration, 0, b.N)
	without := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			withTree = append(withTree, flip(b, tree, i))
			without = append(without, flip(b, chain, i))
		} else {
			without = append(without, flip(b, chain, i))
			withTree = append(withTree, flip(b, tree, i))
		}
	}
	b.StopTimer()
	p99t, p99c := percentile(withTree, 0.99), percentile(without, 0.99)
	b.ReportMetric(percentile(withTree, 0.50), "p50-tree-ms")
	b.ReportMetric(percentile(without, 0.50), "p50-chain-ms")
	b.ReportMetric(p99t, "p99-tree-ms")
	b.ReportMetric(p99c, "p99-chain-ms")
	b.ReportMetric(p99t/p99c, "p99-tree/chain")
}

func createBenchSwitch(b *testing.B, c *console.Console) {
	b.Helper()
	mustStatus(b, call(b, c, "POST", "/api/v1/apps/checkout/switches", adminToken, `{"name":"bench","level":"L3","reason":"bench"}`), 201)
}

// flip turns the bench switch on (even i) or off (odd i) and returns how
// long the published answer took.
func flip(b *testing.B, c *console.Console, i int) time.Duration {
	b.Helper()
	op := "on"
	if i%2 == 1 {
		op = "off"
	}
	start := time.Now()
	r := call(b, c, "POST", "/api/v1/apps/checkout/switches/bench/"+op, adminToken, fmt.Sprintf(`{"reason":"flip %d"}`, i))
	d := time.Since(start)
	if r.Status != 200 || r.str("published") != "true" {
		b.Fatalf("flip %d: %d %s", i, r.Status, r.Raw)
	}
	return d
}

// percentile is the p-th latency in milliseconds.
func percentile(lat []time.Duration, p float64) float64 {
	s := slices.Clone(lat)
	slices.Sort(s)
	return float64(s[int(float64(len(s)-1)*p)]) / float64(time.Millisecond)
}
