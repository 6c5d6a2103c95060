package fleet

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"

	"github.com/switchyard-io/switchyard/internal/etcdtest"
	"github.com/switchyard-io/switchyard/internal/servertest"
	"github.com/switchyard-io/switchyard/sdk/wire"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(etcdtest.LeakOptions()...); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// TestFeed: the model lists a namespace larger than one page, follows
// puts and lease expiries through its watch, sends change notices, and
// lists again after an etcd outage.
func TestFeed(t *testing.T) {
	srv := etcdtest.Start(t)
	cli := srv.Client(t)
	ctx := context.Background()
	const n = 1200 // more than two list pages
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("i%04d", i)
		if _, err := cli.Put(ctx, wire.InstanceKey("default", "checkout", id), string(report(t, id, t0, 1, nil))); err != nil {
			t.Fatal(err)
		}
	}
	sw := `{"app":"checkout","name":"reco","level":"L3","state":"on","rollout":{"percent":100},"version":3}`
	if _, err := cli.Put(ctx, wire.SwitchKey("default", "checkout", "reco"), sw); err != nil {
		t.Fatal(err)
	}
	m := New(Config{Namespace: "default"})
	notices, cancelSub := m.Subscribe()
	defer cancelSub()
	rctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); m.Run(rctx, cli) }()
	defer func() { stop(); <-done }()

	servertest.Eventually(t, 10*time.Second, "listed", func() bool { _, total := m.AppliedBy("checkout", 0, nil); return m.Synced() && total == n })
	if v := m.Switch("checkout", "reco"); v.Value == nil || v.Value.Version != 3 || v.Applied != 0 {
		t.Fatalf("switch view after listing: %+v", v)
	}
	// An instance applies the switch; another one's lease ends.
	resp, _ := cli.Get(ctx, wire.SwitchKey("default", "checkout", "reco"))
	rev := resp.Kvs[0].ModRevision
	if _, err := cli.Put(ctx, wire.InstanceKey("default", "checkout", "i0000"), string(report(t, "i0000", t0, rev, nil))); err != nil {
		t.Fatal(err)
	}
	lease, err := cli.Grant(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, wire.InstanceKey("default", "checkout", "short"), string(report(t, "short", t0, rev, nil)), clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, 10*time.Second, "the ack and the new instance", func() bool { a, total := m.AppliedBy("checkout", rev, nil); return a == 2 && total == n+1 })
	servertest.Eventually(t, 10*time.Second, "the lease-bound instance left", func() bool { _, total := m.AppliedBy("checkout", 0, nil); return total == n })
	select {
	case <-notices:
	case <-time.After(3 * time.Second):
		t.Fatal("no change notice")
	}

	// An etcd outage: the model says it is out of sync, then lists again
	// and keeps up.
	srv.Stop()
	servertest.Eventually(t, 10*time.Second, "out of sync while etcd is down", func() bool { return !m.Synced() })
	srv.Restart()
	if _, err := cli.Put(ctx, wire.InstanceKey("default", "checkout", "late"), string(report(t, "late", t0, rev, nil))); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, 10*time.Second, "the instance put after the outage", func() bool { a, _ := m.AppliedBy("checkout", rev, nil); return m.Synced() && a == 2 })
}
