package server

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/switchyard-io/switchyard/internal/etcdtest"
	"github.com/switchyard-io/switchyard/internal/pgtest"
	"github.com/switchyard-io/switchyard/sdk/wire"
)

// TestAwaitAfterDrain: when the leader drains a change before its caller
// starts waiting, the caller still gets published:true and the revision at
// once, instead of timing out.
func TestAwaitAfterDrain(t *testing.T) {
	srv := etcdtest.Start(t)
	cli := srv.Client(t)
	db, _, err := OpenDB(context.Background(), "", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if sqlDB, err := db.DB(); err == nil {
			sqlDB.Close()
		}
	})
	pub := NewPublisher(db, cli, PublisherConfig{Namespace: "default", Wait: 5 * time.Second})
	svc := NewService(db, nil) // commit without waiting, like a caller that has not reached Await yet
	sess, err := concurrency.NewSession(cli)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	el := concurrency.NewElection(sess, wire.ElectionKey("default"))
	ctx := context.Background()
	if err := el.Campaign(ctx, "test"); err != nil {
		t.Fatal(err)
	}
	pub.SetLeading(true)
	if _, _, err := svc.CreateSwitch(ctx, admin, "checkout", SwitchInput{Name: "early", Level: wire.L3, Reason: "r"}); err != nil {
		t.Fatal(err)
	}
	var ob outboxRow
	if err := db.Order("id DESC").Take(&ob).Error; err != nil {
		t.Fatal(err)
	}
	if err := pub.Drain(ctx, NewFence(el.Key(), el.Rev())); err != nil {
		t.Fatal(err)
	}
	// Without the memory of the publication this would time out and say
	// published:false.
	if rc := pub.Await(ctx, &ob); !rc.Published || rc.Revision == 0 {
		t.Fatalf("receipt after an early drain: %+v", rc)
	}
}

// lead wins the scheduler election of namespace "default" and returns the
// election (to resign) and its fence.
func lead(t *testing.T, cli *clientv3.Client) (*concurrency.Election, Fence) {
	t.Helper()
	sess, err := concurrency.NewSession(cli)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sess.Close() })
	el := concurrency.NewElection(sess, wire.ElectionKey("default"))
	if err := el.Campaign(context.Background(), "test"); err != nil {
		t.Fatal(err)
	}
	return el, NewFence(el.Key(), el.Rev())
}

// TestDrainSkipsFailingEntity: an entity the publisher cannot publish (an
// outbox kind from a newer console, a value etcd refuses as too large) stays
// in the outbox but does not hold back the changes of other entities; once
// it is fixed, its newest state is published. Lost leadership still stops
// the drain.
func TestDrainSkipsFailingEntity(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	db := openDB(t, pgtest.NewDatabase(t))
	ctx := context.Background()
	pub := NewPublisher(db, cli, PublisherConfig{Namespace: "default"})
	svc := NewService(db, nil)
	el, fence := lead(t, cli)
	get := func(app, name string) *wire.Switch {
		t.Helper()
		resp, err := cli.Get(ctx, wire.SwitchKey("default", app, name))
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) == 0 {
			return nil
		}
		var w wire.Switch
		if err := json.Unmarshal(resp.Kvs[0].Value, &w); err != nil {
			t.Fatal(err)
		}
		return &w
	}
	pending := func() []string {
		t.Helper()
		var rows []outboxRow
		if err := db.Order("id").Find(&rows).Error; err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range rows {
			out = append(out, r.Kind+":"+r.Name)
		}
		return out
	}

	// Oldest first: a kind this console does not know, then a switch whose
	// value is over etcd's 1.5 MiB request limit, then an ordinary change.
	if err := db.Create(&outboxRow{Kind: "trigger", App: "checkout", Name: "cpu", CreatedAt: time.Now()}).Error; err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.CreateSwitch(ctx, admin, "checkout", SwitchInput{Name: "big", Level: wire.L1, Fallback: json.RawMessage(`[]`), Reason: "r"}); err != nil {
		t.Fatal(err)
	}
	huge := `"` + strings.Repeat("x", 1600<<10) + `"`
	if err := db.Model(&Switch{}).Where("name = ?", "big").Update("fallback", huge).Error; err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.CreateSwitch(ctx, admin, "checkout", SwitchInput{Name: "small", Level: wire.L3, Reason: "r"}); err != nil {
		t.Fatal(err)
	}
	err := pub.Drain(ctx, fence)
	if err == nil || !strings.Contains(err.Error(), "trigger checkout/cpu") || !strings.Contains(err.Error(), "switch checkout/big") {
		t.Fatalf("drain error should name both failing entities: %v", err)
	}
	if w := get("checkout", "small"); w == nil || w.Version != 1 {
		t.Fatalf("a failing entity held back another one: %+v", w)
	}
	if got := strings.Join(pending(), ","); got != "trigger:cpu,switch:big" {
		t.Fatalf("outbox after the drain: %s", got)
	}

	// A failed entity is tried again after a pause that doubles, not on
	// every drain.
	now := time.Now()
	pub.now = func() time.Time { return now }
	if err := pub.Drain(ctx, fence); err != nil {
		t.Fatalf("drain within the pause retried: %v", err)
	}
	now = now.Add(entityRetryMin)
	if err := pub.Drain(ctx, fence); err == nil || !strings.Contains(err.Error(), "trigger checkout/cpu") {
		t.Fatalf("drain after the pause: %v", err)
	}
	now = now.Add(entityRetryMin)
	if err := pub.Drain(ctx, fence); err != nil {
		t.Fatalf("the second pause did not double: %v", err)
	}

	// Fixed by a new change, the entity is published at once at its newest
	// state (its pause is for the failed change only).
	if _, _, err := svc.PatchSwitch(ctx, admin, "checkout", "big", SwitchPatch{Reason: "shrink", Fallback: ptr(json.RawMessage(`{"items":[]}`))}); err != nil {
		t.Fatal(err)
	}
	if err := pub.Drain(ctx, fence); err != nil {
		t.Fatalf("second drain: %v", err)
	}
	if w := get("checkout", "big"); w == nil || w.Version != 2 || string(w.Fallback) != `{"items":[]}` {
		t.Fatalf("big after its fix: %+v", w)
	}
	if got := strings.Join(pending(), ","); got != "trigger:cpu" {
		t.Fatalf("outbox after the second drain: %s", got)
	}

	// The reconciler still repairs drift while an entity stays pending.
	if _, err := cli.Put(ctx, wire.SwitchKey("default", "checkout", "ghost"), `{}`); err != nil {
		t.Fatal(err)
	}
	now = now.Add(entityRetryMax)
	if repairs, err := pub.Reconcile(ctx, fence); len(repairs) != 1 || err == nil {
		t.Fatalf("reconcile with a pending entity: %v %v", repairs, err)
	}
	if get("checkout", "ghost") != nil {
		t.Fatal("drift not repaired")
	}

	// Lost leadership is not an entity's failure: it stops the drain.
	if err := el.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.TurnOn(ctx, admin, "checkout", "small", Toggle{Reason: "r"}); err != nil {
		t.Fatal(err)
	}
	if err := pub.Drain(ctx, fence); !errors.Is(err, errNotLeader) {
		t.Fatalf("drain after losing leadership: %v", err)
	}
	if w := get("checkout", "small"); w.Version != 1 {
		t.Fatalf("published without the fence: %+v", w)
	}
}

// TestReconcileKeepsUnencodableValue: a switch whose stored value no longer
// encodes (a hand-edited row) is reported, not mistaken for a key the
// database does not know: the reconciler leaves its etcd key alone.
func TestReconcileKeepsUnencodableValue(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	db := openDB(t, pgtest.NewDatabase(t))
	ctx := context.Background()
	pub := NewPublisher(db, cli, PublisherConfig{Namespace: "default"})
	_, fence := lead(t, cli)
	if _, _, err := NewService(db, nil).CreateSwitch(ctx, admin, "checkout", SwitchInput{Name: "list", Level: wire.L1, Fallback: json.RawMessage(`[]`), Reason: "r"}); err != nil {
		t.Fatal(err)
	}
	if err := pub.Drain(ctx, fence); err != nil {
		t.Fatal(err)
	}
	if err := db.Model(&Switch{}).Where("name = ?", "list").Update("fallback", "{oops").Error; err != nil {
		t.Fatal(err)
	}
	repairs, err := pub.Reconcile(ctx, fence)
	if err != nil || len(repairs) != 0 {
		t.Fatalf("reconcile: %v %v", repairs, err)
	}
	if resp, err := cli.Get(ctx, wire.SwitchKey("default", "checkout", "list")); err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("the published key was deleted: %v %v", resp, err)
	}
}

// TestReconcileDuringDrains: the reconciler reads etcd and the database
// without the drains' lock, so a person's change is published during a
// pass. A drain that comes between its two reads (here, on purpose, right
// after its etcd read) changes etcd and empties the outbox: taken at face
// value that is drift, and the pass must read again rather than record
// it. A key edited by hand in etcd is still repaired.
func TestReconcileDuringDrains(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	db := openDB(t, pgtest.NewDatabase(t))
	ctx := context.Background()
	kv := &drainBetweenReads{KV: cli}
	pub := NewPublisher(db, kv, PublisherConfig{Namespace: "default"})
	svc := NewService(db, nil)
	_, fence := lead(t, cli)
	if _, _, err := svc.CreateSwitch(ctx, admin, "checkout", SwitchInput{Name: "reco", Level: wire.L3, Reason: "r"}); err != nil {
		t.Fatal(err)
	}
	if err := pub.Drain(ctx, fence); err != nil {
		t.Fatal(err)
	}
	flips := 0
	kv.between = func() {
		flips++
		if _, _, err := svc.TurnOn(ctx, admin, "checkout", "reco", Toggle{Reason: "between the reads"}); err != nil {
			t.Error(err)
		}
		if err := pub.Drain(ctx, fence); err != nil {
			t.Error(err)
		}
	}
	repairs, err := pub.Reconcile(ctx, fence)
	kv.between = nil
	if err != nil || len(repairs) > 0 || flips != 1 {
		t.Fatalf("a change published between the reads (%d): repairs %+v, %v", flips, repairs, err)
	}

	key := wire.SwitchKey("default", "checkout", "reco")
	if _, err := cli.Put(ctx, key, `{"hand":"edited"}`); err != nil {
		t.Fatal(err)
	}
	repairs, err = pub.Reconcile(ctx, fence)
	if err != nil || len(repairs) != 1 || repairs[0].Key != key {
		t.Fatalf("a hand edit: repairs %+v, %v", repairs, err)
	}
}

// drainBetweenReads is etcd with a hook that runs once the reconciler has
// listed the switches, before it reads the database.
type drainBetweenReads struct {
	KV
	between func()
}

func (k *drainBetweenReads) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	resp, err := k.KV.Get(ctx, key, opts...)
	if fn := k.between; fn != nil && key == wire.KindPrefix("default", wire.KindSwitches) {
		k.between = nil
		fn()
	}
	return resp, err
}
