package server

import (
	"context"
	"testing"
	"time"

	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/switchyard-io/switchyard/internal/etcdtest"
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
	pub.setLeading(true)
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
