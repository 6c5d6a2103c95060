package console_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/pgtest"
	"github.com/switchyard-io/switchyard/internal/servertest"
	"github.com/switchyard-io/switchyard/server/console"
)

// BenchmarkFlip measures an on/off flip through the HTTP API, committed to
// Postgres and published to embedded etcd before the response, and
// reports the latency percentiles. In the same run, flipped in turn, the
// same L3 switch of a protected app (approval policy on): its flips apply
// in one call, and the policy costs one row read, so p99-protected/plain
// stays near 1.
func BenchmarkFlip(b *testing.B) {
	e := newEnv(b)
	c := e.start()
	waitLeader(b, c)
	mustStatus(b, call(b, c, "PUT", "/api/v1/apps/payments/policy", adminToken, `{"protected":true,"reason":"bench"}`), 200)
	for _, app := range []string{"checkout", "payments"} {
		mustStatus(b, call(b, c, "POST", "/api/v1/apps/"+app+"/switches", adminToken, `{"name":"bench","level":"L3","reason":"bench"}`), 201)
	}
	plain := make([]time.Duration, 0, b.N)
	protected := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i%2 == 0 {
			plain = append(plain, flipApp(b, c, "checkout", i))
			protected = append(protected, flipApp(b, c, "payments", i))
		} else {
			protected = append(protected, flipApp(b, c, "payments", i))
			plain = append(plain, flipApp(b, c, "checkout", i))
		}
	}
	b.StopTimer()
	b.ReportMetric(percentile(plain, 0.50), "p50-ms")
	b.ReportMetric(percentile(plain, 0.99), "p99-ms")
	b.ReportMetric(percentile(protected, 0.99), "p99-protected-ms")
	b.ReportMetric(percentile(protected, 0.99)/percentile(plain, 0.99), "p99-protected/plain")
}

// BenchmarkFlipUnderJobs measures a person's flip through the HTTP API on
// one console twice in the same run: idle (five apps' SDK instances
// serving traffic), then with the leader's jobs busy — 200 auto-trigger
// rules on the fleet source evaluated every second, 20 running staged
// rollouts and 5 drills of those apps with their probes —
// and reports the p99 of each and, for jobs, its ratio to idle (target
// ≤ 1.5). The jobs' state saves do not take the audit chain's lock, so a
// person's change does not queue behind them.
func BenchmarkFlipUnderJobs(b *testing.B) {
	e := newEnv(b)
	c := e.start(steadyLeader, func(cfg *console.Config) { cfg.TriggerInterval = time.Second })
	waitLeader(b, c)
	mustStatus(b, call(b, c, "POST", "/api/v1/apps/checkout/switches", adminToken, `{"name":"bench","level":"L3","reason":"bench"}`), 201)
	// The drilled apps' SDK instances and their traffic run in both
	// halves: what differs is only the console's jobs.
	for i := range 5 {
		app := fmt.Sprintf("drilled-%d", i)
		dt := startDrillTarget(b, e, app, svcCorrect, 1)
		seedDrill(b, c, app, dt.urls[0], "")
		waitInstances(b, c, app, 1)
		mustStatus(b, call(b, c, "PATCH", "/api/v1/apps/"+app+"/drills/reco", adminToken, `{"duration":"30m","reason":"bench: keep it running"}`), 200)
	}
	var idle float64
	b.Run("idle", func(b *testing.B) { idle = flips(b, c) })

	for i := range 200 {
		sw := fmt.Sprintf("guarded-%03d", i)
		mustStatus(b, call(b, c, "POST", "/api/v1/apps/checkout/switches", adminToken, `{"name":"`+sw+`","level":"L3","reason":"bench"}`), 201)
		mustStatus(b, call(b, c, "POST", "/api/v1/apps/checkout/triggers", adminToken, fmt.Sprintf(
			`{"name":%q,"switch":%q,"source":"fleet","query":"instances","trigger":{"op":">","threshold":1000000},"recover":{"op":"<","threshold":1},"reason":"bench"}`,
			sw, sw)), 201)
	}
	for i := range 20 {
		sw := fmt.Sprintf("staged-%02d", i)
		mustStatus(b, call(b, c, "POST", "/api/v1/apps/checkout/switches", adminToken, `{"name":"`+sw+`","level":"L3","reason":"bench"}`), 201)
		mustStatus(b, call(b, c, "POST", "/api/v1/apps/checkout/rollouts", adminToken, `{"switch":"`+sw+`","template":"default","reason":"bench"}`), 201)
	}
	for i := range 5 {
		app := fmt.Sprintf("drilled-%d", i)
		mustStatus(b, call(b, c, "POST", "/api/v1/apps/"+app+"/drills/reco/runs", adminToken, `{"reason":"bench"}`), 202)
	}
	servertest.Eventually(b, 60*time.Second, "5 drills running and 200 rules evaluated", func() bool {
		var running, evaluated int64
		db := e.db(b)
		db.Table("drill_runs").Where("finished_at IS NULL AND started_at IS NOT NULL").Count(&running)
		db.Table("trigger_states").Where("last_at IS NOT NULL").Count(&evaluated)
		return running == 5 && evaluated == 200
	})
	b.Run("jobs", func(b *testing.B) {
		p99 := flips(b, c)
		if idle > 0 {
			b.ReportMetric(p99/idle, "x-idle")
		}
	})
	// The drills end before the console does: their overrides are taken
	// back while it leads.
	for i := range 5 {
		app := fmt.Sprintf("drilled-%d", i)
		mustStatus(b, call(b, c, "POST", "/api/v1/apps/"+app+"/drills/reco/runs/1/abort", adminToken, `{"reason":"bench over"}`), 200)
	}
	servertest.Eventually(b, 60*time.Second, "the drills end", func() bool {
		var open int64
		e.db(b).Table("drill_runs").Where("finished_at IS NULL").Count(&open)
		return open == 0
	})
}

// flips flips switch checkout/bench b.N times and reports the latency
// percentiles; it returns the p99 in milliseconds.
func flips(b *testing.B, c *console.Console) float64 {
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		lat = append(lat, flip(b, c, i))
	}
	b.StopTimer()
	b.ReportMetric(percentile(lat, 0.50), "p50-ms")
	b.ReportMetric(percentile(lat, 0.99), "p99-ms")
	return percentile(lat, 0.99)
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
	for _, c := range []*console.Console{tree, chain} {
		mustStatus(b, call(b, c, "POST", "/api/v1/apps/checkout/switches", adminToken, `{"name":"bench","level":"L3","reason":"bench"}`), 201)
	}
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

// flip turns switch checkout/bench on (even i) or off (odd i) and returns
// how long the published answer took.
func flip(b *testing.B, c *console.Console, i int) time.Duration {
	b.Helper()
	return flipApp(b, c, "checkout", i)
}

// flipApp is flip of switch app/bench.
func flipApp(b *testing.B, c *console.Console, app string, i int) time.Duration {
	b.Helper()
	op := "on"
	if i%2 == 1 {
		op = "off"
	}
	start := time.Now()
	r := call(b, c, "POST", "/api/v1/apps/"+app+"/switches/bench/"+op, adminToken, fmt.Sprintf(`{"reason":"flip %d"}`, i))
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
