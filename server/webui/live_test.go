package webui

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/switchyard-io/switchyard/internal/etcdtest"
	"github.com/switchyard-io/switchyard/internal/pgtest"
	"github.com/switchyard-io/switchyard/internal/servertest"
	"github.com/switchyard-io/switchyard/sdk/wire"
)

// TestHubStopJoins: the hub announces a change of a published value in
// etcd but not an instance ack, and stop returns only after its watch and
// its audit poll have ended, while the etcd client and the database are
// still open.
func TestHubStopJoins(t *testing.T) {
	etcd := etcdtest.Start(t)
	db := servertest.OpenDB(t, pgtest.NewDatabase(t), t.TempDir())
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{etcd.Endpoint}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	// Connections opened now are the client's and the pool's, not the hub's.
	if _, err := cli.Get(context.Background(), "/hub-test/"); err != nil {
		t.Fatal(err)
	}
	if err := db.Exec("SELECT 1").Error; err != nil {
		t.Fatal(err)
	}
	before := goleak.IgnoreCurrent()

	h := newHub(cli, db, "hubtest")
	h.start()
	ch, unsubscribe := h.subscribe()
	defer unsubscribe()
	// The watch may not be established yet: write until a notice comes.
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for got := false; !got; {
		select {
		case <-ch:
			got = true
		case <-tick.C:
			if _, err := cli.Put(context.Background(), wire.SwitchKey("hubtest", "checkout", "reco"), time.Now().String()); err != nil {
				t.Fatal(err)
			}
		case <-deadline:
			t.Fatal("no change notice within 10 s")
		}
	}
	// An instance ack wakes no browser. Let the notices of the puts above
	// settle, put an instance key: no notice; a switch: one.
	quiet := func(d time.Duration) bool {
		select {
		case <-ch:
			return false
		case <-time.After(d):
			return true
		}
	}
	for !quiet(300 * time.Millisecond) {
	}
	if _, err := cli.Put(context.Background(), wire.InstanceKey("hubtest", "checkout", "pod-1"), "{}"); err != nil {
		t.Fatal(err)
	}
	if !quiet(time.Second) {
		t.Fatal("an instance ack woke the streams")
	}
	if _, err := cli.Put(context.Background(), wire.SwitchKey("hubtest", "checkout", "reco"), "{}"); err != nil {
		t.Fatal(err)
	}
	if quiet(10 * time.Second) {
		t.Fatal("no notice for the switch change")
	}

	h.stop()
	select {
	case <-h.closing:
	default:
		t.Error("stop left the streams open")
	}
	if err := goleak.Find(append(etcdtest.LeakOptions(), before)...); err != nil {
		t.Errorf("the hub's goroutines outlive stop:\n%v", err)
	}
}
