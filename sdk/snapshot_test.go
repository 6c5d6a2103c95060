package sdk

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-io/switchyard/internal/etcdtest"
	"github.com/switchyard-io/switchyard/sdk/wire"
)

// writeSnapshot writes a valid disk snapshot of (ns, app) holding sws at
// rev, through an offline client's normal write path.
func writeSnapshot(t testing.TB, dir, ns, app string, rev int64, sws ...*wire.Switch) {
	t.Helper()
	c, err := New(context.Background(), Config{Namespace: ns, App: app, SnapshotDir: dir, Logger: discard})
	if err != nil {
		t.Fatal(err)
	}
	ups := make([]kvUpdate, len(sws))
	for i, sw := range sws {
		ups[i] = kvUpdate{key: wire.SwitchKey(ns, sw.App, sw.Name), value: []byte(mustJSON(t, sw)), modRev: rev}
	}
	c.apply(ups, true, rev, SourceLive)
	c.Close()
}

func TestColdStartFromSnapshotWithEtcdDown(t *testing.T) {
	srv := etcdtest.Start(t)
	cli := srv.Client(t)
	dir := t.TempDir()
	const ns, app = "test", "checkout"
	on := mkSwitch(app, "recommend", wire.StateOn, 100)
	putSwitch(t, cli, ns, on)
	g := mkSwitch(wire.GlobalApp, "maintenance", wire.StateOn, 100)
	putSwitch(t, cli, ns, g)
	putSwitch(t, cli, ns, mkSwitch(app, "reviews", wire.StateOff, 100))
	rule := wire.LimitRule{App: app, Resource: "POST /orders", Kind: wire.KindConcurrency,
		Mode: wire.ModeShadow, Scope: wire.ScopeInstance, Max: 8, Version: 1}
	put(t, cli, wire.LimitKey(ns, app, rule.Resource), mustJSON(t, rule))
	o := mkSwitch(app, "drilled", wire.StateOn, 100)
	rev := put(t, cli, wire.OverrideKey(ns, app, "drilled"), mustJSON(t, o))

	c := newTestClient(t, Config{Endpoints: []string{srv.Endpoint}, Namespace: ns, App: app, SnapshotDir: dir})
	waitFor(t, 10*time.Second, "applied", func() bool { return c.Revision() >= rev })
	waitFor(t, 10*time.Second, "snapshot written", func() bool {
		_, err := os.Stat(SnapshotPath(dir, ns, app))
		return err == nil
	})
	c.Close()
	srv.Stop()

	t.Setenv(EnvVar(app, "reviews"), "on") // the snapshot wins over the environment
	start := time.Now()
	c2 := newTestClient(t, Config{Endpoints: []string{srv.Endpoint}, Namespace: ns, App: app,
		SnapshotDir: dir, DialTimeout: 500 * time.Millisecond})
	ctx := context.Background()
	h := c2.Switch("recommend")
	if !h.On(ctx) || h.Source() != SourceSnapshot {
		t.Errorf("recommend: On = %v from %v, want on from snapshot", h.On(ctx), h.Source())
	}
	if !c2.On(ctx, "maintenance") || c2.On(ctx, "reviews") {
		t.Error("global switch or off switch not restored from snapshot")
	}
	if c2.On(ctx, "drilled") {
		t.Error("an override must not survive a restart through the snapshot")
	}
	if r, ok := c2.LimitRule("POST /orders"); !ok || r.Max != 8 {
		t.Errorf("limit rule from snapshot = %+v, %v", r, ok)
	}
	if c2.Revision() < rev-1 || !c2.Stale() || c2.Ready() {
		t.Errorf("revision %d (want ≥ %d), stale %v, ready %v", c2.Revision(), rev-1, c2.Stale(), c2.Ready())
	}
	t.Logf("answered from snapshot %v after New was called", time.Since(start))
}

func TestBadSnapshotsFallBackToEnvAndDefaults(t *testing.T) {
	const ns, app = "test", "checkout"
	src := t.TempDir()
	writeSnapshot(t, src, ns, app, 42, mkSwitch(app, "recommend", wire.StateOn, 100), mkSwitch(app, "reviews", wire.StateOn, 100))
	good, err := os.ReadFile(SnapshotPath(src, ns, app))
	if err != nil {
		t.Fatal(err)
	}
	writeSnapshot(t, src, ns, "payments", 42, mkSwitch("payments", "recommend", wire.StateOn, 100))
	foreign, _ := os.ReadFile(SnapshotPath(src, ns, "payments"))
	writeSnapshot(t, src, "prod", app, 42, mkSwitch(app, "recommend", wire.StateOn, 100))
	otherNS, _ := os.ReadFile(SnapshotPath(src, "prod", app))

	flip := func(i int) []byte {
		b := bytes.Clone(good)
		b[i] ^= 0x20
		return b
	}
	cases := map[string][]byte{
		"flipped body byte":   flip(len(good) - 20),
		"flipped header byte": flip(len(snapshotMagic) + 5),
		"flipped magic":       flip(0),
		"truncated":           good[:len(good)*2/3],
		"truncated header":    good[:len(snapshotMagic)+10],
		"empty":               {},
		"another app":         foreign,
		"another namespace":   otherNS,
		"garbage":             []byte("\x00\xff not a snapshot"),
	}
	t.Setenv(EnvVar(app, "reviews"), "off")
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := SnapshotPath(dir, ns, app)
			os.MkdirAll(filepath.Dir(path), 0o755)
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			reg := prometheus.NewRegistry()
			c := newTestClient(t, Config{Namespace: ns, App: app, SnapshotDir: dir, Registerer: reg})
			ctx := context.Background()
			if c.Switch("recommend").On(ctx) || !c.Switch("recommend", Default(true)).On(ctx) {
				t.Error("recommend should answer from the code default")
			}
			if c.Switch("reviews", Default(true)).On(ctx) {
				t.Error("reviews should answer from the environment (off)")
			}
			if got := metricValue(t, reg, "switchyard_sdk_update_errors_total", "kind=snapshot"); got != 1 {
				t.Errorf("snapshot errors = %v, want 1", got)
			}
			if c.Revision() != 0 {
				t.Errorf("revision = %d from a bad snapshot", c.Revision())
			}
		})
	}
	// The good one, for contrast.
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, ns), 0o755)
	os.WriteFile(SnapshotPath(dir, ns, app), good, 0o644)
	c := newTestClient(t, Config{Namespace: ns, App: app, SnapshotDir: dir})
	if !c.On(context.Background(), "recommend") || c.Revision() != 42 || c.snapErrors.Load() != 0 {
		t.Error("good snapshot not loaded")
	}
}

func TestSnapshotWritesAreCoalesced(t *testing.T) {
	const ns, app = "test", "checkout"
	dir := t.TempDir()
	c := newTestClient(t, Config{Namespace: ns, App: app, SnapshotDir: dir})
	path := SnapshotPath(dir, ns, app)
	start := time.Now()
	var rev int64
	for rev = 1; rev <= 200; rev++ {
		sw := mkSwitch(app, "x", wire.StateOn, float64(rev%100))
		c.apply([]kvUpdate{{key: wire.SwitchKey(ns, app, "x"), value: []byte(mustJSON(t, sw)), modRev: rev}}, false, rev, SourceLive)
	}
	elapsed := time.Since(start)
	c.Close()
	writes := c.disk.writes.Load()
	if limit := int64(elapsed/snapshotInterval) + 2; writes > limit {
		t.Errorf("%d snapshot writes in %v, want at most %d", writes, elapsed, limit)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h, ups, err := decodeSnapshot(data, ns, app)
	if err != nil || h.Revision != 200 || len(ups) != 1 {
		t.Fatalf("final snapshot: %+v, %d items, %v", h, len(ups), err)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("temporary files left behind: %v", entries)
	}
}

// TestSnapshotWriteRetriedAfterFailure checks that a failed snapshot write
// is retried without waiting for another change or for Close.
func TestSnapshotWriteRetriedAfterFailure(t *testing.T) {
	const ns, app = "test", "checkout"
	dir := t.TempDir()
	blocker := filepath.Join(dir, ns) // a file where the namespace directory goes
	if err := os.WriteFile(blocker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	c := newTestClient(t, Config{Namespace: ns, App: app, SnapshotDir: dir})
	loadErrors := c.snapErrors.Load() // reading the snapshot failed too
	sw := mkSwitch(app, "x", wire.StateOn, 100)
	c.apply([]kvUpdate{{key: wire.SwitchKey(ns, app, "x"), value: []byte(mustJSON(t, sw)), modRev: 7}}, true, 7, SourceLive)
	waitFor(t, 10*time.Second, "a failed write", func() bool { return c.snapErrors.Load() > loadErrors })
	if err := os.Remove(blocker); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the write retried", func() bool { return c.disk.writes.Load() > 0 })
	data, err := os.ReadFile(SnapshotPath(dir, ns, app))
	if err != nil {
		t.Fatal(err)
	}
	if h, ups, err := decodeSnapshot(data, ns, app); err != nil || h.Revision != 7 || len(ups) != 1 {
		t.Fatalf("snapshot: %+v, %d items, %v", h, len(ups), err)
	}
}
