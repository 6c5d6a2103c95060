package console_test

import (
	"context"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/internal/servertest"
	"github.com/switchyard-io/switchyard/server/console"
)

// TestRetentionJobRuns: the console's leader prunes with --retention: a
// finding resolved 40 days ago goes at the start of the term when the
// retention is 30 days, one resolved 10 days ago stays, and the prune is
// audited once.
func TestRetentionJobRuns(t *testing.T) {
	e := newEnv(t)
	db := servertest.OpenDB(t, e.pgURL, t.TempDir())
	now := time.Now()
	for _, f := range []struct {
		target   string
		resolved time.Time
	}{{"switch/checkout/old", now.Add(-40 * 24 * time.Hour)}, {"switch/checkout/young", now.Add(-10 * 24 * time.Hour)}} {
		if err := db.Exec(`INSERT INTO findings (kind, target, severity, summary, since, updated_at, resolved_at) VALUES ('no_owner', ?, 'info', 's', ?, ?, ?)`,
			f.target, f.resolved, f.resolved, f.resolved).Error; err != nil {
			t.Fatal(err)
		}
	}
	c := e.start(func(cfg *console.Config) { cfg.Retention = 30 * 24 * time.Hour })
	waitLeader(t, c)
	var evs []audit.Event
	servertest.Eventually(t, 10*time.Second, "the prune is audited", func() bool {
		evs, _, _ = c.Service.ListAudit(context.Background(), audit.Filter{Action: audit.RetentionPrune})
		return len(evs) > 0
	})
	var left []string
	c.DB.Table("findings").Order("id").Pluck("target", &left)
	if len(evs) != 1 || len(left) != 1 || left[0] != "switch/checkout/young" {
		t.Fatalf("%d prunes audited, findings left %v", len(evs), left)
	}
	t.Logf("audited: %s", evs[0].Reason)
}
