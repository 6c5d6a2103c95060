package retention_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/internal/pgtest"
	"github.com/switchyard-io/switchyard/internal/servertest"
	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/drill"
	"github.com/switchyard-io/switchyard/server/finding"
	"github.com/switchyard-io/switchyard/server/notify"
	"github.com/switchyard-io/switchyard/server/retention"
	"github.com/switchyard-io/switchyard/server/rollout"
	"github.com/switchyard-io/switchyard/server/trigger"
)

var now = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

// pruners are the console's.
var pruners = []retention.Pruner{
	{Kind: "drill_runs", Prune: drill.PruneRuns},
	{Kind: "findings", Prune: finding.PruneResolved},
	{Kind: "rollouts", Prune: rollout.PruneEnded},
	{Kind: "trigger_evaluations", Prune: trigger.PruneEvaluations},
	{Kind: "deliveries", Prune: notify.PruneDeliveries},
	{Kind: "notifications", Prune: notify.PruneEvents},
}

// seed writes history of every pruned kind: some ended 100 days ago (past
// the default retention), some 10 days ago, some still open.
func seed(t *testing.T, db *gorm.DB) {
	t.Helper()
	old, young := now.Add(-100*24*time.Hour), now.Add(-10*24*time.Hour)
	exec := func(sql string, args ...any) {
		t.Helper()
		if err := db.Exec(sql, args...).Error; err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	run := func(n int, outcome string, finished *time.Time) {
		exec(`INSERT INTO drill_runs (app, drill, switch_name, number, started_via, phase, outcome, spec, created_at, finished_at)
			VALUES ('checkout', 'reco', 'recommend', ?, 'manual', ?, ?, '{}', ?, ?)`, n, map[bool]string{true: "done", false: "active"}[finished != nil], outcome, old, finished)
	}
	run(1, "passed", &old)   // pruned
	run(2, "passed", &old)   // the switch's newest pass: kept for never_drilled
	run(3, "failed", &old)   // pruned
	run(4, "failed", &young) // kept
	run(5, "", nil)          // open: kept
	find := func(target string, resolved *time.Time) {
		exec(`INSERT INTO findings (kind, target, severity, summary, since, updated_at, resolved_at) VALUES ('no_owner', ?, 'info', 's', ?, ?, ?)`, target, old, old, resolved)
	}
	find("switch/checkout/a", &old)   // pruned
	find("switch/checkout/b", &young) // kept
	find("switch/checkout/c", nil)    // open: kept
	plan := func(sw, state string, ended *time.Time) {
		exec(`INSERT INTO rollouts (app, switch_name, direction, state, plan, before_state, base_version, progress, version, created_by, reason, created_at, updated_at, ended_at)
			VALUES ('checkout', ?, 'on', ?, '{}', '{}', 1, '{}', 1, 'ann', 'r', ?, ?, ?)`, sw, state, old, old, ended)
	}
	plan("a", rollout.Done, &old)     // pruned
	plan("b", rollout.Reverted, &old) // pruned
	plan("c", rollout.Done, &young)   // kept
	plan("d", rollout.Running, nil)   // active: kept
	exec(`INSERT INTO triggers (id, app, name, switch_name, source, query, trigger_op, trigger_threshold, trigger_for, recover_op, recover_threshold,
		recover_for, cooldown, max_on, missing_data, flap_max_transitions, flap_window, mode, version, updated_at, created_at)
		VALUES (1, 'checkout', 'cpu', 'recommend', 'fleet', 'q', '>', 1, '1m', '<', 1, '1m', '1m', '1h', 'hold', 5, '1h', 'enforce', 1, ?, ?)`, old, old)
	for _, at := range []time.Time{old, old, old, young} { // three pruned
		exec(`INSERT INTO trigger_evaluations (trigger_id, at, outcome, phase_from, phase_to) VALUES (1, ?, 'value', 'ok', 'ok')`, at)
	}
	exec(`INSERT INTO channels (id, name, url, secret, secret_set_at, events, format, version, updated_at, created_at)
		VALUES (1, 'ops', 'http://x', 's', ?, '*', 'json', 1, ?, ?)`, old, old, old)
	event := func(id int, dispatched time.Time, status string, finished *time.Time) {
		exec(`INSERT INTO notifications (id, event_key, kind, title, created_at, dispatched_at) VALUES (?, ?, 'drill.failed', 't', ?, ?)`, id, fmt.Sprint("event-", id), dispatched, dispatched)
		exec(`INSERT INTO deliveries (notification_id, channel_id, status, created_at, finished_at) VALUES (?, 1, ?, ?, ?)`, id, status, dispatched, finished)
	}
	event(1, old, "delivered", &old)     // delivery and event pruned
	event(2, young, "delivered", &young) // kept
	event(3, old, "pending", nil)        // unfinished: kept, with its event
}

func counts(t *testing.T, db *gorm.DB) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, table := range []string{"drill_runs", "findings", "rollouts", "trigger_evaluations", "deliveries", "notifications"} {
		var n int64
		if err := db.Table(table).Count(&n).Error; err != nil {
			t.Fatal(err)
		}
		out[table] = n
	}
	return out
}

// TestPrune: the leader's retention job deletes what ended before the
// retention age — finished drill runs (each switch's newest pass kept),
// resolved findings, ended plans, trigger evaluations, finished deliveries
// and their events — and keeps what is younger or still open; one audit
// event says what went; a prune with nothing to delete records nothing; a
// deposed leader's step deletes nothing.
func TestPrune(t *testing.T) {
	db := servertest.OpenDB(t, pgtest.NewDatabase(t), t.TempDir())
	svc := server.NewService(db, nil, server.WithClock(func() time.Time { return now }))
	ctx := context.Background()
	stale, term := server.Term{Rev: 1, Holder: "old"}, server.Term{Rev: 2, Holder: "new"}
	for _, tm := range []server.Term{stale, term} {
		if err := svc.ClaimTerm(ctx, tm); err != nil {
			t.Fatal(err)
		}
	}
	seed(t, db)
	before := counts(t, db)
	job := retention.New(retention.Config{Service: svc, Pruners: pruners})
	if err := job.Step(ctx, stale, now); !errors.Is(err, server.ErrNotLeader) {
		t.Fatalf("a deposed leader's prune: %v", err)
	}
	if got := counts(t, db); !equal(got, before) {
		t.Fatalf("a deposed leader's prune deleted rows: %v → %v", before, got)
	}
	if err := job.Step(ctx, term, now); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"drill_runs": 3, "findings": 2, "rollouts": 2, "trigger_evaluations": 1, "deliveries": 2, "notifications": 2}
	if got := counts(t, db); !equal(got, want) {
		t.Fatalf("after the prune: %v, want %v", got, want)
	}
	var numbers []int
	db.Table("drill_runs").Order("number").Pluck("number", &numbers)
	if len(numbers) != 3 || numbers[0] != 2 {
		t.Fatalf("drill runs kept: %v, want #2 (the newest pass), #4, #5", numbers)
	}
	evs, _, err := svc.ListAudit(ctx, audit.Filter{Action: audit.RetentionPrune})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].ActorKind != audit.ActorSystem || evs[0].Cause != "retention" {
		t.Fatalf("audit events of the prune: %+v", evs)
	}
	var after retention.Pruned
	if err := json.Unmarshal([]byte(evs[0].After), &after); err != nil {
		t.Fatal(err)
	}
	deleted := map[string]int64{"drill_runs": 2, "findings": 1, "rollouts": 2, "trigger_evaluations": 3, "deliveries": 1, "notifications": 1}
	if !equal(after.Deleted, deleted) || !after.Before.Equal(now.Add(-retention.DefaultAge)) {
		t.Fatalf("the event says %+v, want %v before %v", after, deleted, now.Add(-retention.DefaultAge))
	}
	t.Logf("audited: %s", evs[0].Reason)
	if err := job.Step(ctx, term, now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if evs, _, _ := svc.ListAudit(ctx, audit.Filter{Action: audit.RetentionPrune}); len(evs) != 1 {
		t.Fatalf("a prune with nothing to delete was audited: %d events", len(evs))
	}
}

// TestPruneInBatches: with a batch of one row per kind, each step deletes
// at most one row of each kind, audits it, and wakes the job for the next
// step while a kind has more; the steps together delete what one big
// prune would.
func TestPruneInBatches(t *testing.T) {
	db := servertest.OpenDB(t, pgtest.NewDatabase(t), t.TempDir())
	svc := server.NewService(db, nil, server.WithClock(func() time.Time { return now }))
	ctx := context.Background()
	term := server.Term{Rev: 1, Holder: "a"}
	if err := svc.ClaimTerm(ctx, term); err != nil {
		t.Fatal(err)
	}
	seed(t, db)
	job := retention.New(retention.Config{Service: svc, Batch: 1, Pruners: pruners})
	var steps int
	for ; steps < 10; steps++ {
		if err := job.Step(ctx, term, now); err != nil {
			t.Fatal(err)
		}
		select {
		case <-job.Wake():
			continue
		default:
		}
		break
	}
	want := map[string]int64{"drill_runs": 3, "findings": 2, "rollouts": 2, "trigger_evaluations": 1, "deliveries": 2, "notifications": 2}
	if got := counts(t, db); !equal(got, want) {
		t.Fatalf("after %d steps: %v, want %v", steps+1, got, want)
	}
	evs, _, err := svc.ListAudit(ctx, audit.Filter{Action: audit.RetentionPrune})
	if err != nil {
		t.Fatal(err)
	}
	// Three trigger evaluations are the most of one kind: three steps
	// delete, the fourth finds nothing more and is not audited.
	if steps != 3 || len(evs) != 3 {
		t.Fatalf("%d steps woke the next, %d prunes audited; want 3 and 3", steps, len(evs))
	}
}

func equal(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
