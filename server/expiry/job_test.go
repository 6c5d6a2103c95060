package expiry_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/internal/pgtest"
	"github.com/switchyard-io/switchyard/internal/servertest"
	"github.com/switchyard-io/switchyard/sdk/wire"
	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/expiry"
	"github.com/switchyard-io/switchyard/server/finding"
)

var admin = server.Actor{Name: "token:olga", Kind: audit.ActorToken, Role: server.RoleAdmin}

// TestExpiryJob walks two switches of max_on 1h through their expiry on
// both databases, stepping the job with the time it wants: both are
// reminded half an hour ahead; at the expiry the auto_off one is turned
// off (one audit event, actor expiry, with its cause) and the remind one
// gets an expired_on finding; 4h later it escalates (critical), once; a
// person's renewal resolves the finding at once, saying who. Steps
// repeated at the same time change nothing, and every event is enqueued
// once.
func TestExpiryJob(t *testing.T) {
	for _, url := range []string{"", pgtest.NewDatabase(t)} {
		db := servertest.OpenDB(t, url, t.TempDir())
		ctx := context.Background()
		t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
		now := t0
		svc := server.NewService(db, nil, server.WithClock(func() time.Time { return now }))
		term := server.Term{Rev: 3, Holder: "test"}
		if err := svc.ClaimTerm(ctx, term); err != nil {
			t.Fatal(err)
		}
		exp := expiry.New(svc, expiry.Config{RemindBefore: 24 * time.Hour, EscalateAfter: 4 * time.Hour})
		svc.OnPersonChange(exp.OnPersonChange)
		job := exp.Job()
		for _, s := range []struct{ name, policy string }{{"reco", server.ExpiryAutoOff}, {"reviews", server.ExpiryRemind}} {
			if _, _, err := svc.CreateSwitch(ctx, admin, "checkout", server.SwitchInput{Name: s.name, Level: wire.L3, MaxOn: "1h", ExpiryPolicy: s.policy, Owner: "team-recs", Reason: "seed"}); err != nil {
				t.Fatal(err)
			}
			if _, _, err := svc.TurnOn(ctx, admin, "checkout", s.name, server.Toggle{Reason: "INC-9 recs slow"}); err != nil {
				t.Fatal(err)
			}
		}
		step := func(at time.Duration) {
			t.Helper()
			now = t0.Add(at)
			for range 2 { // a repeated step must change nothing
				if err := job.Step(ctx, term, now); err != nil {
					t.Fatal(err)
				}
			}
		}
		open := func(kind finding.Kind, name string) []finding.Finding {
			t.Helper()
			list, err := finding.List(db, finding.Filter{Kind: kind, Target: "switch/checkout/" + name, Open: true})
			if err != nil {
				t.Fatal(err)
			}
			return list
		}
		events := func(kind string) int64 {
			var n int64
			db.Table("notifications").Where("kind = ?", kind).Count(&n)
			return n
		}

		step(29 * time.Minute)
		if len(open(finding.ExpiryReminder, "reco")) != 0 {
			t.Fatal("reminded more than half of max_on ahead")
		}
		step(30 * time.Minute)
		if len(open(finding.ExpiryReminder, "reco")) != 1 || len(open(finding.ExpiryReminder, "reviews")) != 1 || events("expiry.reminder") != 2 {
			t.Fatalf("reminders: %d expiry.reminder events", events("expiry.reminder"))
		}
		if f := open(finding.ExpiryReminder, "reco")[0]; !strings.Contains(f.Summary, "will be turned off in 30m") {
			t.Fatalf("auto_off reminder: %q", f.Summary)
		}

		step(time.Hour)
		reco, _ := svc.GetSwitch(ctx, "checkout", "reco")
		reviews, _ := svc.GetSwitch(ctx, "checkout", "reviews")
		if reco.State != wire.StateOff || reviews.State != wire.StateOn {
			t.Fatalf("at the expiry: reco %s (auto_off), reviews %s (remind)", reco.State, reviews.State)
		}
		evs, _, _ := svc.ListAudit(ctx, audit.Filter{Target: "switch/checkout/reco", Action: audit.SwitchOff})
		if len(evs) != 1 || evs[0].ActorKind != audit.ActorExpiry || evs[0].Cause != "expiry/checkout/reco" || !strings.Contains(evs[0].Reason, "max_on 1h, policy auto_off") {
			t.Fatalf("turning off: %+v", evs)
		}
		all, _ := finding.List(db, finding.Filter{Kind: finding.ExpiryReminder, Target: "switch/checkout/reco"})
		if len(all) != 1 || all[0].Resolution != "turned off by the expiry job at its expiry" {
			t.Fatalf("reco's reminder: %+v", all)
		}
		expired := open(finding.ExpiredOn, "reviews")
		if len(expired) != 1 || expired[0].Severity != finding.Warning || !strings.Contains(expired[0].Summary, "on for 1h 0m — confirm or turn off") {
			t.Fatalf("reviews at its expiry: %+v", expired)
		}
		if len(open(finding.ExpiryReminder, "reviews")) != 0 || events("expiry.turned_off") != 1 || events("expiry.reminder") != 3 {
			t.Fatalf("events at the expiry: turned_off %d, reminder %d", events("expiry.turned_off"), events("expiry.reminder"))
		}

		step(5*time.Hour - time.Minute)
		if events("expiry.escalation") != 0 {
			t.Fatal("escalated before EscalateAfter")
		}
		step(5 * time.Hour)
		if events("expiry.escalation") != 1 || open(finding.ExpiredOn, "reviews")[0].Severity != finding.Critical {
			t.Fatal("no escalation after EscalateAfter")
		}
		step(9 * time.Hour)
		if events("expiry.escalation") != 1 {
			t.Fatal("escalated twice")
		}

		renewed, _, err := exp.Renew(ctx, admin, "checkout", "reviews", server.Change{Reason: "INC-9 still open"})
		if err != nil {
			t.Fatal(err)
		}
		all, _ = finding.List(db, finding.Filter{Kind: finding.ExpiredOn, Target: "switch/checkout/reviews"})
		if len(all) != 1 || !strings.HasPrefix(all[0].Resolution, "renewed by token:olga until ") || !renewed.ExpiresAt.Equal(now.Add(time.Hour)) {
			t.Fatalf("after the renewal: %+v, expires %v", all, renewed.ExpiresAt)
		}
		var states int64
		db.Table("expiry_states").Count(&states)
		step(9*time.Hour + time.Minute)
		if states != 0 || len(open(finding.ExpiredOn, "reviews")) != 0 {
			t.Fatalf("after the renewal: %d states, the finding reopened", states)
		}
		if n := countSwitchOff(t, svc); n != 1 {
			t.Fatalf("%d switch.off events in all", n)
		}
		var dup int64
		db.Table("notifications").Select("count(*) - count(DISTINCT event_key)").Scan(&dup)
		if dup != 0 {
			t.Fatalf("%d duplicate events", dup)
		}
	}
}

func countSwitchOff(t *testing.T, svc *server.Service) int {
	evs, _, err := svc.ListAudit(context.Background(), audit.Filter{Action: audit.SwitchOff})
	if err != nil {
		t.Fatal(err)
	}
	return len(evs)
}

// TestPersonWins: a person who changes the switch between the job's read
// and its write makes the job's turn-off fail (version conflict) rather
// than clobber the change; the job's transaction leaves nothing behind,
// and the next step sees the person's state.
func TestPersonWins(t *testing.T) {
	db := servertest.OpenDB(t, pgtest.NewDatabase(t), t.TempDir())
	ctx := context.Background()
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	now := t0
	svc := server.NewService(db, nil, server.WithClock(func() time.Time { return now }))
	term := server.Term{Rev: 1, Holder: "test"}
	if err := svc.ClaimTerm(ctx, term); err != nil {
		t.Fatal(err)
	}
	exp := expiry.New(svc, expiry.Config{})
	svc.OnPersonChange(exp.OnPersonChange)
	if _, _, err := svc.CreateSwitch(ctx, admin, "checkout", server.SwitchInput{Name: "reco", Level: wire.L3, MaxOn: "1h", ExpiryPolicy: server.ExpiryAutoOff, Reason: "seed"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.TurnOn(ctx, admin, "checkout", "reco", server.Toggle{Reason: "incident"}); err != nil {
		t.Fatal(err)
	}
	now = t0.Add(2 * time.Hour)
	// The job read the switch, then the person renewed it before the job
	// wrote. (Inside one job transaction this interleaving cannot happen:
	// InTerm takes the audit chain's lock first, so a person's change waits
	// for the job's transaction to end.) The job's turn-off, guarded by the
	// version it read, finds a newer one.
	read, err := svc.GetSwitch(ctx, "checkout", "reco")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.RenewSwitch(ctx, admin, "checkout", "reco", server.Change{Reason: "still needed"}); err != nil {
		t.Fatal(err)
	}
	_, err = svc.InTerm(ctx, term, func(jt *server.JobTx) error {
		v := read.Version
		_, err := jt.TurnOff(server.JobActor(audit.ActorExpiry, "expiry/checkout/reco"), "checkout", "reco", server.Toggle{Reason: "expired", Version: &v})
		return err
	})
	if err == nil {
		t.Fatal("the job's stale turn-off committed over the person's renewal")
	}
	if err := exp.Job().Step(ctx, term, now); err != nil {
		t.Fatal(err)
	}
	sw, _ := svc.GetSwitch(ctx, "checkout", "reco")
	if sw.State != wire.StateOn || !sw.ExpiresAt.Equal(now.Add(time.Hour)) || countSwitchOff(t, svc) != 0 {
		t.Fatalf("after the renewal: %s, expires %v", sw.State, sw.ExpiresAt)
	}
}
