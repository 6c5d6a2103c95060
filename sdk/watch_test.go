package sdk

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/switchyard-io/switchyard/internal/etcdtest"
	"github.com/switchyard-io/switchyard/sdk/wire"
)

// holdWatcher holds back every response of the watch on one prefix until
// release is closed, as if that watch's channel were drained late: the
// order across the client's six watches is not defined.
type holdWatcher struct {
	clientv3.Watcher
	prefix  string
	release chan struct{}
}

func (w *holdWatcher) Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan {
	in := w.Watcher.Watch(ctx, key, opts...)
	if key != w.prefix {
		return in
	}
	out := make(chan clientv3.WatchResponse)
	go func() {
		defer close(out)
		select {
		case <-w.release:
		case <-ctx.Done():
			return
		}
		for wr := range in {
			select {
			case out <- wr:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out
}

// TestRevisionNeverAheadOfAnUnappliedEvent checks that Revision, and the
// applied revision acked in the instance registry, never name a revision
// while an earlier event on another watched prefix is still undelivered.
func TestRevisionNeverAheadOfAnUnappliedEvent(t *testing.T) {
	srv := etcdtest.Start(t)
	cli := srv.Client(t)
	const ns, app = "test", "checkout"
	hold := &holdWatcher{prefix: wire.AppPrefix(ns, wire.KindOverrides, app), release: make(chan struct{})}
	c := newWrappedTestClient(t, Config{Endpoints: []string{srv.Endpoint}, Namespace: ns, App: app, InstanceID: "i1"},
		func(cli *clientv3.Client) { hold.Watcher, cli.Watcher = cli.Watcher, hold })
	ctx := context.Background()
	if err := c.WaitReady(ctxT(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}

	early := put(t, cli, wire.OverrideKey(ns, app, "drill"), mustJSON(t, mkSwitch(app, "drill", wire.StateOn, 100)))
	late := putSwitch(t, cli, ns, mkSwitch(app, "flip", wire.StateOn, 100))
	waitFor(t, 10*time.Second, "the later switch applied", func() bool { return c.On(ctx, "flip") })
	key := wire.InstanceKey(ns, app, "i1")
	check := func() {
		t.Helper()
		if r := c.Revision(); r >= early {
			t.Fatalf("Revision() = %d while the event at %d is undelivered", r, early)
		}
		var inst wire.Instance
		if v, ok := srv.Get(t, cli, key); ok && json.Unmarshal([]byte(v), &inst) == nil && inst.AppliedRevision >= early {
			t.Fatalf("registry acks revision %d while the event at %d is undelivered", inst.AppliedRevision, early)
		}
	}
	check()
	// Long enough for the other watches' progress notifications and an
	// instance ack (ack.Quiet+ack.Spread) to have come and gone.
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		check()
	}
	if c.On(ctx, "drill") {
		t.Fatal("the held override was applied")
	}

	close(hold.release)
	waitFor(t, 10*time.Second, "everything applied and confirmed", func() bool {
		return c.On(ctx, "drill") && c.Revision() >= late
	})
	waitFor(t, 10*time.Second, "registry acks the confirmed revision", func() bool {
		var inst wire.Instance
		v, ok := srv.Get(t, cli, key)
		return ok && json.Unmarshal([]byte(v), &inst) == nil && inst.AppliedRevision >= late
	})
}
