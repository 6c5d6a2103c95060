package approval_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/internal/pgtest"
	"github.com/switchyard-io/switchyard/internal/servertest"
	"github.com/switchyard-io/switchyard/sdk/wire"
	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/approval"
	"github.com/switchyard-io/switchyard/server/finding"
)

// TestBreakGlassReview: a break-glass opens one review and one
// announcement; its author cannot close the review; left open past 24 h
// the leader's job turns it critical and announces it once more; another
// person closes it with a note.
func TestBreakGlassReview(t *testing.T) {
	db := servertest.OpenDB(t, pgtest.NewDatabase(t), t.TempDir())
	ctx := context.Background()
	now := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	svc := server.NewService(db, nil, server.WithClock(func() time.Time { return now }))
	term := server.Term{Rev: 3, Holder: "test"}
	if err := svc.ClaimTerm(ctx, term); err != nil {
		t.Fatal(err)
	}
	reviews := approval.New(svc)
	admin := server.Actor{Name: "token:admin#1", Kind: audit.ActorToken, Role: server.RoleAdmin}
	ann := server.Actor{Name: "ann", Kind: audit.ActorUser, Role: server.RoleOperator, Apps: []string{"pay"}}
	bob := server.Actor{Name: "bob", Kind: audit.ActorUser, Role: server.RoleOperator, Apps: []string{"pay"}}
	if _, err := svc.SetPolicy(ctx, admin, "pay", server.PolicyInput{Protected: true, Reason: "payments"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.CreateSwitch(ctx, ann, "pay", server.SwitchInput{Name: "writes", Level: wire.L4, Reason: "seed"}); err != nil {
		t.Fatal(err)
	}
	_, _, err := svc.TurnOn(ctx, ann, "pay", "writes", server.Toggle{Reason: "INC-1"})
	if !errors.Is(err, server.ErrApprovalRequired) {
		t.Fatalf("L4 on a protected app: %v, want approval required", err)
	}
	if _, _, err := svc.TurnOn(server.WithBreakGlass(ctx), ann, "pay", "writes", server.Toggle{Reason: "INC-1 melting"}); err != nil {
		t.Fatal(err)
	}
	count := func(table, where string, args ...any) int64 {
		t.Helper()
		var n int64
		if err := db.Table(table).Where(where, args...).Count(&n).Error; err != nil {
			t.Fatal(err)
		}
		return n
	}
	open, err := finding.List(db, finding.Filter{Kind: finding.BreakGlassReview, Open: true})
	if err != nil || len(open) != 1 || open[0].Severity != finding.Warning {
		t.Fatalf("reviews: %+v %v", open, err)
	}
	id := open[0].ID
	if n := count("notifications", "kind = ?", "break_glass"); n != 1 {
		t.Fatalf("break-glass announcements: %d", n)
	}
	if err := reviews.CloseReview(ctx, ann, id, approval.Review{Note: "fine"}); !errors.Is(err, server.ErrForbidden) {
		t.Fatalf("the author closed their own review: %v", err)
	}

	job := reviews.Job(time.Minute)
	for _, at := range []time.Duration{23 * time.Hour, 25 * time.Hour, 26 * time.Hour} {
		now = time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC).Add(at)
		if err := job.Step(ctx, term, now); err != nil {
			t.Fatal(err)
		}
		want, announced := finding.Warning, int64(1)
		if at > 24*time.Hour {
			want, announced = finding.Critical, 2
		}
		open, _ = finding.List(db, finding.Filter{Kind: finding.BreakGlassReview, Open: true})
		if len(open) != 1 || open[0].Severity != want || count("notifications", "kind = ?", "break_glass") != announced {
			t.Fatalf("after %v: %+v, %d announcements", at, open, count("notifications", "kind = ?", "break_glass"))
		}
	}
	if err := reviews.CloseReview(ctx, bob, id, approval.Review{Note: "checked: the database was at 100 % CPU"}); err != nil {
		t.Fatal(err)
	}
	if n := count("findings", "id = ? AND resolved_at IS NOT NULL", id); n != 1 {
		t.Fatal("the review is still open")
	}
	if err := reviews.CloseReview(ctx, bob, id, approval.Review{Note: "again"}); !errors.Is(err, server.ErrConflict) {
		t.Fatalf("closing twice: %v", err)
	}
}

// TestRequestsOnSQLite: the embedded default database keeps requests and
// approvals as Postgres does (its migration is the same in intent).
func TestRequestsOnSQLite(t *testing.T) {
	db := servertest.OpenDB(t, "", t.TempDir())
	ctx := context.Background()
	svc := server.NewService(db, nil)
	approval.New(svc)
	admin := server.Actor{Name: "admin", Kind: audit.ActorUser, Role: server.RoleAdmin}
	ann := server.Actor{Name: "ann", Kind: audit.ActorUser, Role: server.RoleOperator, Apps: []string{"pay"}}
	bob := server.Actor{Name: "bob", Kind: audit.ActorUser, Role: server.RoleOperator, Apps: []string{"pay"}}
	if _, err := svc.SetPolicy(ctx, admin, "pay", server.PolicyInput{Protected: true, Reason: "payments"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.CreateSwitch(ctx, ann, "pay", server.SwitchInput{Name: "writes", Level: wire.L5, Reason: "seed"}); err != nil {
		t.Fatal(err)
	}
	_, _, err := svc.TurnOn(ctx, ann, "pay", "writes", server.Toggle{Reason: "INC-1"})
	var held *server.ApprovalRequired
	if !errors.As(err, &held) || held.Request == nil {
		t.Fatalf("held: %v", err)
	}
	id := held.Request.ID
	if _, err := svc.ApproveRequest(ctx, ann, id, server.Decision{Reason: "mine"}); !errors.Is(err, server.ErrForbidden) {
		t.Fatalf("self-approval: %v", err)
	}
	if _, err := svc.ApproveRequest(ctx, bob, id, server.Decision{Reason: "ok"}); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.ApproveRequest(ctx, bob, id, server.Decision{Reason: "twice"}); !errors.Is(err, server.ErrConflict) {
		t.Fatalf("approving twice: %v", err)
	}
	v, _, err := svc.ApplyRequest(ctx, ann, id, false, "")
	if err != nil || v.State != server.RequestApplied {
		t.Fatalf("apply: %+v %v", v, err)
	}
	if sw, _ := svc.GetSwitch(ctx, "pay", "writes"); sw.State != wire.StateOn {
		t.Fatal("not applied")
	}
}
