package server

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/sdk/wire"
)

// TestRenewSwitch: renewing a switch that is on moves its expiry to now +
// max_on and keeps its on-since time, audited as switch.renew with the
// reason; a switch that is off, a missing reason and a stale version are
// refused, naming state, reason and version, and change nothing.
func TestRenewSwitch(t *testing.T) {
	dialects(t, func(t *testing.T, svc *Service) {
		ctx := context.Background()
		clock := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
		svc.now = func() time.Time { return clock }
		if _, _, err := svc.CreateSwitch(ctx, admin, "checkout", SwitchInput{Name: "reco", Level: wire.L3, MaxOn: "1h", Reason: "r"}); err != nil {
			t.Fatal(err)
		}
		field := func(err error) string {
			var ve *ValidationError
			if errors.As(err, &ve) {
				return ve.Fields[0].Field
			}
			return ""
		}
		if _, _, err := svc.RenewSwitch(ctx, admin, "checkout", "reco", Change{Reason: "still needed"}); field(err) != "state" {
			t.Fatalf("renewing a switch that is off: %v", err)
		}
		on, _, err := svc.TurnOn(ctx, admin, "checkout", "reco", Toggle{Reason: "incident"})
		if err != nil {
			t.Fatal(err)
		}
		clock = clock.Add(50 * time.Minute)
		if _, _, err := svc.RenewSwitch(ctx, admin, "checkout", "reco", Change{Reason: "  "}); field(err) != "reason" {
			t.Fatalf("renewing without a reason: %v", err)
		}
		stale := on.Version - 1
		if _, _, err := svc.RenewSwitch(ctx, admin, "checkout", "reco", Change{Reason: "r", Version: &stale}); !errors.Is(err, ErrConflict) {
			t.Fatalf("renewing at a stale version: %v", err)
		}
		before, _, _ := svc.ListAudit(ctx, audit.Filter{Target: on.Target()})
		renewed, _, err := svc.RenewSwitch(ctx, admin, "checkout", "reco", Change{Reason: "INC-7 still open", Version: &on.Version})
		if err != nil {
			t.Fatal(err)
		}
		if want := clock.Add(time.Hour); !renewed.ExpiresAt.Equal(want) || !renewed.TurnedOnAt.Equal(*on.TurnedOnAt) || renewed.State != wire.StateOn {
			t.Fatalf("renewed: expires %v (want %v), on since %v (want %v)", renewed.ExpiresAt, want, renewed.TurnedOnAt, on.TurnedOnAt)
		}
		after, _, _ := svc.ListAudit(ctx, audit.Filter{Target: on.Target()})
		if len(after) != len(before)+1 || after[0].Action != audit.SwitchRenew || after[0].Reason != "INC-7 still open" {
			t.Fatalf("audit after renew: %d events (had %d), newest %+v", len(after), len(before), after[0])
		}
	})
}
