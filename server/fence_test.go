package server

import (
	"context"
	"errors"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/switchyard-io/switchyard/internal/etcdtest"
	"github.com/switchyard-io/switchyard/sdk/wire"
)

// electionLeader returns the lease of the election key that leads, or
// NoLease while there is none.
func electionLeader(t *testing.T, cli *clientv3.Client) clientv3.LeaseID {
	return etcdtest.LeaderLease(t, cli, wire.ElectionKey("default"))
}

// TestDeposedLeaderIsFenced: a leader whose session etcd ended without it
// noticing (a paused or partitioned process, the case a short TTL makes
// likelier) cannot publish once another scheduler leads: every write is a
// transaction fenced on the old leader's election key.
func TestDeposedLeaderIsFenced(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	ctx := context.Background()
	_, deposed := lead(t, cli)
	if _, err := cli.Revoke(ctx, electionLeader(t, cli)); err != nil { // as etcd does when the TTL runs out
		t.Fatal(err)
	}
	lead(t, cli) // the successor

	db := openDB(t, "")
	if _, _, err := NewService(db, nil).CreateSwitch(ctx, admin, "checkout", SwitchInput{Name: "late", Level: wire.L3, Reason: "r"}); err != nil {
		t.Fatal(err)
	}
	pub := NewPublisher(db, cli, PublisherConfig{Namespace: "default"})
	if err := pub.Drain(ctx, deposed); !errors.Is(err, errNotLeader) {
		t.Fatalf("drain under the deposed leader's fence: %v, want errNotLeader", err)
	}
	if _, err := pub.Reconcile(ctx, deposed); !errors.Is(err, errNotLeader) {
		t.Fatalf("reconcile under the deposed leader's fence: %v, want errNotLeader", err)
	}
	resp, err := cli.Get(ctx, wire.SwitchKey("default", "checkout", "late"))
	if err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("the deposed leader wrote to etcd: %v %v", resp.Kvs, err)
	}
}
