package finding_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/internal/pgtest"
	"github.com/switchyard-io/switchyard/internal/servertest"
	"github.com/switchyard-io/switchyard/sdk/wire"
	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/finding"
	"github.com/switchyard-io/switchyard/server/fleet"
)

// TestJudge is the findings job's decision as a table: each kind is bad,
// good (with why) or unknown — no data is never a verdict.
func TestJudge(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	ago := func(days float64) *time.Time { t := now.Add(-time.Duration(days * 24 * float64(time.Hour))); return &t }
	base := finding.Facts{App: "checkout", Name: "reco", Owner: "team-recs", Created: *ago(200)}
	with := func(mod func(*finding.Facts)) finding.Facts { f := base; mod(&f); return f }
	type want struct {
		kind    finding.Kind
		outcome finding.Outcome
		has     string // in the summary (bad) or why (good)
	}
	for _, tc := range []struct {
		name  string
		facts finding.Facts
		want  []want
	}{
		{"owner set", base, []want{{finding.NoOwner, finding.Good, "owner set to team-recs"}}},
		{"no owner", with(func(f *finding.Facts) { f.Owner = "" }), []want{{finding.NoOwner, finding.Bad, "checkout/reco has no owner"}}},
		{"no fleet data: unknown", base, []want{{finding.NeverRead, finding.Unknown, ""}}},
		{"watched 31 days, never read", with(func(f *finding.Facts) { f.Reporting, f.WatchedSince = true, ago(31) }),
			[]want{{finding.NeverRead, finding.Bad, "No instance has read checkout/reco in 30 days"}}},
		{"watched 10 days, never read: too soon", with(func(f *finding.Facts) { f.Reporting, f.WatchedSince = true, ago(10) }),
			[]want{{finding.NeverRead, finding.Unknown, ""}}},
		{"young switch, watched long", with(func(f *finding.Facts) { f.Reporting, f.WatchedSince, f.Created = true, ago(60), *ago(5) }),
			[]want{{finding.NeverRead, finding.Unknown, ""}}},
		{"last read 31 days ago", with(func(f *finding.Facts) { f.Reporting, f.WatchedSince, f.LastRead = true, ago(90), ago(31) }),
			[]want{{finding.NeverRead, finding.Bad, "in 30 days"}}},
		{"read 5 days ago", with(func(f *finding.Facts) { f.LastRead = ago(5) }),
			[]want{{finding.NeverRead, finding.Good, "read by an instance at"}}},
		{"read long ago, instances gone: unknown", with(func(f *finding.Facts) { f.WatchedSince, f.LastRead = ago(90), ago(40) }),
			[]want{{finding.NeverRead, finding.Unknown, ""}}},
		{"drills unknown", base, []want{{finding.NeverDrilled, finding.Unknown, ""}}},
		{"never drilled, 200 days old", with(func(f *finding.Facts) { f.DrillKnown = true }),
			[]want{{finding.NeverDrilled, finding.Bad, "has not passed a drill in 90 days"}}},
		{"never drilled, 10 days old", with(func(f *finding.Facts) { f.DrillKnown, f.Created = true, *ago(10) }),
			[]want{{finding.NeverDrilled, finding.Unknown, ""}}},
		{"drill passed 10 days ago", with(func(f *finding.Facts) { f.DrillKnown, f.LastPassed = true, ago(10) }),
			[]want{{finding.NeverDrilled, finding.Good, "a drill passed at"}}},
		{"drill passed 100 days ago", with(func(f *finding.Facts) { f.DrillKnown, f.LastPassed = true, ago(100) }),
			[]want{{finding.NeverDrilled, finding.Bad, "in 90 days"}}},
		{"no verification reported", with(func(f *finding.Facts) { f.Reporting, f.Verifiable, f.OffSince = true, true, *ago(1) }),
			[]want{{finding.FallbackMismatch, finding.Unknown, ""}, {finding.FallbackUnverified, finding.Unknown, ""}}},
		{"fallback lost a field", with(func(f *finding.Facts) {
			f.Reporting, f.Verifiable = true, true
			f.Verification = &fleet.Verification{Instances: 3, Mismatching: 1, Verified: 2, Mismatch: 1, Match: 9, Diffs: []string{"/currency: missing"}, LastMatch: ago(0.01)}
		}), []want{{finding.FallbackMismatch, finding.Bad, "lost the live answer's shape: /currency: missing"}, {finding.FallbackUnverified, finding.Good, "a shadow sample matched"}}},
		{"fallback verified", with(func(f *finding.Facts) {
			f.Reporting, f.Verifiable = true, true
			f.Verification = &fleet.Verification{Instances: 14, Verified: 14, Match: 140, LastMatch: ago(0.001)}
		}), []want{{finding.FallbackMismatch, finding.Good, "verified on 14/14 instances"}}},
		{"off 8 days, watched 8 days, never matched", with(func(f *finding.Facts) {
			f.Reporting, f.Verifiable, f.OffSince, f.WatchedSince = true, true, *ago(8), ago(8)
		}), []want{{finding.FallbackUnverified, finding.Bad, "was not verified in 7 days"}}},
		{"off 3 days: too soon", with(func(f *finding.Facts) {
			f.Reporting, f.Verifiable, f.OffSince, f.WatchedSince = true, true, *ago(3), ago(30)
		}), []want{{finding.FallbackUnverified, finding.Unknown, ""}}},
		{"an L3 switch is not verifiable", with(func(f *finding.Facts) { f.Reporting, f.WatchedSince = true, ago(30) }),
			[]want{{finding.FallbackUnverified, finding.Good, "not an L1 or L2 switch"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := map[finding.Kind]finding.Verdict{}
			for _, v := range finding.Judge(tc.facts, now, finding.JobConfig{}) {
				got[v.Kind] = v
			}
			for _, w := range tc.want {
				v := got[w.kind]
				text := v.Why
				if v.Outcome == finding.Bad {
					text = v.Spec.Summary
					if v.Spec.Target != "switch/checkout/reco" || v.Spec.App != "checkout" {
						t.Errorf("%s: spec %+v", w.kind, v.Spec)
					}
				}
				if v.Outcome != w.outcome || !strings.Contains(text, w.has) {
					t.Errorf("%s: outcome %d %q, want %d with %q", w.kind, v.Outcome, text, w.outcome, w.has)
				}
			}
		})
	}
}

// drills stands in for the drills domain's LastPassed, so the test sets
// the time of each switch's last passing drill by hand
// (TestNeverDrilledFollowsDrills in server/console runs real drills).
type drills struct {
	mu     sync.Mutex
	passed map[string]time.Time
	asked  int
}

func (d *drills) LastPassed(_ context.Context, app, name string) (time.Time, bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.asked++
	t, ok := d.passed[app+"/"+name]
	return t, ok, nil
}

// TestFindingsJob: on a real database, the job opens no_owner and
// never_drilled for an old switch, follows the drill results it is given
// (a passing drill resolves never_drilled, saying so; 90 days later it
// opens again), resolves no_owner once an owner is set, and resolves what
// it opened for a switch that was deleted. Every opening and resolution
// enqueues one notification.
func TestFindingsJob(t *testing.T) {
	db := servertest.OpenDB(t, pgtest.NewDatabase(t), t.TempDir())
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	svc := server.NewService(db, nil, server.WithClock(func() time.Time { return now }))
	term := server.Term{Rev: 7, Holder: "test"}
	if err := svc.ClaimTerm(ctx, term); err != nil {
		t.Fatal(err)
	}
	admin := server.Actor{Name: "token:admin", Kind: audit.ActorToken, Role: server.RoleAdmin}
	for _, name := range []string{"reco", "gone"} {
		if _, _, err := svc.CreateSwitch(ctx, admin, "checkout", server.SwitchInput{Name: name, Level: wire.L3, Reason: "seed"}); err != nil {
			t.Fatal(err)
		}
	}
	d := &drills{passed: map[string]time.Time{}}
	job := finding.NewJob(svc, finding.JobConfig{LastPassed: d.LastPassed})
	step := func(at time.Time) {
		t.Helper()
		now = at
		if err := job.Step(ctx, term, at); err != nil {
			t.Fatal(err)
		}
	}
	openOf := func(kind finding.Kind, target string) []finding.Finding {
		t.Helper()
		list, err := finding.List(db, finding.Filter{Kind: kind, Target: target, Open: true})
		if err != nil {
			t.Fatal(err)
		}
		return list
	}
	reco := "switch/checkout/reco"

	step(now.Add(24 * time.Hour))
	if len(openOf(finding.NoOwner, reco)) != 1 || len(openOf(finding.NeverDrilled, reco)) != 0 {
		t.Fatal("a day old: want no_owner only")
	}
	step(now.Add(91 * 24 * time.Hour))
	if len(openOf(finding.NeverDrilled, reco)) != 1 || len(openOf(finding.NeverDrilled, "switch/checkout/gone")) != 1 {
		t.Fatal("91 days without a drill: want never_drilled on both switches")
	}
	// A drill passes; the next look at the drills (10 minutes on) resolves it.
	d.mu.Lock()
	d.passed["checkout/reco"] = now
	d.mu.Unlock()
	step(now.Add(time.Minute))
	if len(openOf(finding.NeverDrilled, reco)) != 1 {
		t.Fatal("resolved before the drills were asked again")
	}
	step(now.Add(10 * time.Minute))
	all, _ := finding.List(db, finding.Filter{Kind: finding.NeverDrilled, Target: reco})
	if len(all) != 1 || all[0].ResolvedAt == nil || !strings.HasPrefix(all[0].Resolution, "a drill passed at ") {
		t.Fatalf("never_drilled after a passing drill: %+v", all)
	}
	step(now.Add(91 * 24 * time.Hour))
	if len(openOf(finding.NeverDrilled, reco)) != 1 {
		t.Fatal("91 days after the last passing drill: want never_drilled again")
	}
	owner := "team-recs"
	if _, _, err := svc.PatchSwitch(ctx, admin, "checkout", "reco", server.SwitchPatch{Owner: &owner, Reason: "owned"}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.DeleteSwitch(ctx, admin, "checkout", "gone", server.Change{Reason: "retired"}); err != nil {
		t.Fatal(err)
	}
	step(now.Add(time.Minute))
	all, _ = finding.List(db, finding.Filter{Kind: finding.NoOwner, Target: reco})
	if len(all) != 1 || all[0].Resolution != "owner set to team-recs" {
		t.Fatalf("no_owner after setting one: %+v", all)
	}
	gone, _ := finding.List(db, finding.Filter{Target: "switch/checkout/gone"})
	for _, f := range gone {
		if f.ResolvedAt == nil || f.Resolution != "the switch was deleted" {
			t.Errorf("finding of a deleted switch: %+v", f)
		}
	}
	var opened, resolved int64
	db.Table("notifications").Where("kind = ?", "finding.opened").Count(&opened)
	db.Table("notifications").Where("kind = ?", "finding.resolved").Count(&resolved)
	var findings, closed int64
	db.Table("findings").Count(&findings)
	db.Table("findings").Where("resolved_at IS NOT NULL").Count(&closed)
	if opened != findings || resolved != closed {
		t.Fatalf("%d findings, %d opened notifications; %d resolved, %d resolved notifications", findings, opened, closed, resolved)
	}
	t.Logf("%d findings opened, %d resolved, each notified once; LastPassed answered %d calls in 6 steps (asked at most every 10 minutes)", findings, closed, d.asked)
}
