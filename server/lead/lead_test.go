package lead_test

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"gorm.io/gorm"

	"github.com/switchyard-io/switchyard/internal/etcdtest"
	"github.com/switchyard-io/switchyard/internal/servertest"
	"github.com/switchyard-io/switchyard/sdk/wire"
	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/lead"
)

// runScheduler runs a scheduler with id against srv until the test ends.
func runScheduler(t *testing.T, cli *clientv3.Client, id string) *lead.Scheduler {
	t.Helper()
	svc := server.NewService(openDB(t), nil)
	s := lead.New(cli, svc, lead.Config{Namespace: "default", ID: id, SessionTTL: time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return s
}

// electionLeader returns the lease of the election key that leads, or
// NoLease while there is none.
func electionLeader(t *testing.T, cli *clientv3.Client) clientv3.LeaseID {
	return etcdtest.LeaderLease(t, cli, wire.ElectionKey("default"))
}

// TestCampaignBackoffResets: a scheduler whose session ends again and
// again (here its lease is revoked from outside, as an etcd restart or an
// expiry would end it) leads again within a fraction of a second every
// time: the pause between campaigns restarts after each won campaign
// instead of doubling towards seconds.
func TestCampaignBackoffResets(t *testing.T) {
	cli := etcdtest.Start(t).Client(t)
	s := runScheduler(t, cli, "a")
	servertest.Eventually(t, 10*time.Second, "the scheduler leads", s.Leading)
	var worst time.Duration
	for i := range 8 {
		lease := electionLeader(t, cli)
		ended := time.Now()
		if _, err := cli.Revoke(context.Background(), lease); err != nil {
			t.Fatal(err)
		}
		servertest.Eventually(t, 15*time.Second, "the scheduler leads again", func() bool {
			l := electionLeader(t, cli)
			return l != clientv3.NoLease && l != lease && s.Leading()
		})
		took := time.Since(ended)
		t.Logf("session %d ended: leading again after %v", i+1, took.Round(time.Millisecond))
		worst = max(worst, took)
	}
	// Noticing the revoked lease takes up to one keep-alive (0.5 s); the
	// pause before the new campaign at most retryMin.
	if worst > 2*time.Second {
		t.Fatalf("re-campaigns slow down: worst %v", worst)
	}
}

// openDB opens a migrated SQLite database in a temporary directory.
func openDB(t *testing.T) *gorm.DB {
	t.Helper()
	db := servertest.OpenDB(t, "", t.TempDir())
	return db
}
