package server

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/sdk/wire"
)

// TestBootstrapTokenRotation: restarting with a different
// SWITCHYARD_BOOTSTRAP_TOKEN revokes the old bootstrap token (audited) so
// exactly one works, and the two are told apart in the audit log.
func TestBootstrapTokenRotation(t *testing.T) {
	dialects(t, func(t *testing.T, svc *Service) {
		ctx := context.Background()
		const first, second = "sy_first-bootstrap-token", "sy_second-bootstrap-token"
		for _, secret := range []string{first, first, second, second} {
			if gen, err := svc.EnsureBootstrapToken(ctx, secret); err != nil || gen != "" {
				t.Fatalf("start with %s: %q %v", secret, gen, err)
			}
		}
		if _, err := svc.Authenticate(ctx, first); !errors.Is(err, ErrUnauthorized) {
			t.Fatalf("the rotated-out bootstrap token still authenticates: %v", err)
		}
		now, err := svc.Authenticate(ctx, second)
		if err != nil || now.Role != RoleAdmin {
			t.Fatalf("the new bootstrap token: %+v %v", now, err)
		}
		events, _, err := svc.ListAudit(ctx, audit.Filter{Target: "token/" + BootstrapTokenName})
		if err != nil {
			t.Fatal(err)
		}
		var actions []audit.Action
		for i := len(events) - 1; i >= 0; i-- {
			actions = append(actions, events[i].Action)
		}
		if want := []audit.Action{audit.TokenCreate, audit.TokenRevoke, audit.TokenCreate}; len(actions) != 3 || actions[0] != want[0] || actions[1] != want[1] || actions[2] != want[2] {
			t.Fatalf("bootstrap audit trail %v, want %v", actions, want)
		}
		// The first token's actor differs from the second's, though both
		// were named "bootstrap".
		tokens, _, _ := svc.ListTokens(ctx, Page{})
		if len(tokens) != 2 || tokens[0].actor().Name == tokens[1].actor().Name {
			t.Fatalf("tokens %+v: actors not told apart", tokens)
		}
		// A revoked secret configured again stays revoked.
		if _, err := svc.EnsureBootstrapToken(ctx, first); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Authenticate(ctx, first); !errors.Is(err, ErrUnauthorized) {
			t.Fatalf("a revoked bootstrap token came back: %v", err)
		}
	})
}

// TestTokenNamesAreUnique: an active token's name cannot be minted again;
// once it is revoked the name is free.
func TestTokenNamesAreUnique(t *testing.T) {
	dialects(t, func(t *testing.T, svc *Service) {
		ctx := context.Background()
		_, tok, err := svc.CreateToken(ctx, admin, TokenInput{Name: "ci", Role: RoleViewer, Reason: "r"})
		if err != nil {
			t.Fatal(err)
		}
		events := count(t, svc.DB(), "audit_events")
		if _, _, err := svc.CreateToken(ctx, admin, TokenInput{Name: "ci", Role: RoleAdmin, Reason: "r"}); !errors.Is(err, ErrAlreadyExists) || fieldOf(err) != "name" {
			t.Fatalf("second active token named ci: %v", err)
		}
		if count(t, svc.DB(), "audit_events") != events || count(t, svc.DB(), "api_tokens") != 1 {
			t.Fatal("a refused token was written")
		}
		if err := svc.RevokeToken(ctx, admin, tok.ID, Change{Reason: "rotate"}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := svc.CreateToken(ctx, admin, TokenInput{Name: "ci", Role: RoleViewer, Reason: "rotated"}); err != nil {
			t.Fatalf("the name of a revoked token: %v", err)
		}
	})
}

// TestLimitStateIsValidated: a state other than on/off is a field error,
// not a database CHECK failure (503), and writes nothing.
func TestLimitStateIsValidated(t *testing.T) {
	dialects(t, func(t *testing.T, svc *Service) {
		ctx := context.Background()
		if _, _, err := svc.CreateLimit(ctx, admin, "checkout", LimitInput{LimitRule: wire.LimitRule{Resource: "GET /", Kind: wire.KindConcurrency, Max: 2}, Reason: "r"}); err != nil {
			t.Fatal(err)
		}
		events := count(t, svc.DB(), "audit_events")
		for _, state := range []string{"", "ON", "paused"} {
			if _, _, err := svc.SetLimitState(ctx, admin, "checkout", "GET /", state, Toggle{Reason: "r"}); fieldOf(err) != "state" {
				t.Errorf("state %q: %v, want a field error on state", state, err)
			}
		}
		if count(t, svc.DB(), "audit_events") != events {
			t.Fatal("a refused state change was audited")
		}
	})
}

// TestRolloutChangeKeepsExpiry: turning an off switch on starts its expiry
// clock; changing the rollout of a switch that is on, and rolling back to
// an earlier on state, keep it.
func TestRolloutChangeKeepsExpiry(t *testing.T) {
	dialects(t, func(t *testing.T, svc *Service) {
		ctx := context.Background()
		clock := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
		svc.now = func() time.Time { return clock }
		if _, _, err := svc.CreateSwitch(ctx, admin, "checkout", SwitchInput{Name: "reco", Level: wire.L3, MaxOn: "1h", Reason: "r"}); err != nil {
			t.Fatal(err)
		}
		on, _, err := svc.TurnOn(ctx, admin, "checkout", "reco", Toggle{Reason: "incident", Rollout: &wire.Rollout{Percent: 5}})
		if err != nil {
			t.Fatal(err)
		}
		wantExp := clock.Add(time.Hour)
		if on.ExpiresAt == nil || !on.ExpiresAt.Equal(wantExp) {
			t.Fatalf("expires_at %v after turning on, want %v", on.ExpiresAt, wantExp)
		}
		onEvent, _, _ := svc.ListAudit(ctx, audit.Filter{Target: on.Target(), Limit: 1})
		clock = clock.Add(30 * time.Minute)
		wider, _, err := svc.TurnOn(ctx, admin, "checkout", "reco", Toggle{Reason: "widen", Rollout: &wire.Rollout{Percent: 50}})
		if err != nil {
			t.Fatal(err)
		}
		if !wider.ExpiresAt.Equal(wantExp) || !wider.TurnedOnAt.Equal(*on.TurnedOnAt) {
			t.Fatalf("widening moved expires_at to %v (on since %v)", wider.ExpiresAt, wider.TurnedOnAt)
		}
		clock = clock.Add(10 * time.Minute)
		back, _, err := svc.RollbackSwitch(ctx, admin, "checkout", "reco", onEvent[0].ID, Change{Reason: "back to 5 %"})
		if err != nil {
			t.Fatal(err)
		}
		if back.Rollout().Percent != 5 || !back.ExpiresAt.Equal(wantExp) {
			t.Fatalf("rollback: %v %% expires %v, want 5 %% expiring %v", back.Rollout().Percent, back.ExpiresAt, wantExp)
		}
	})
}

// TestNullFallbackMeansNone: "fallback": null on create is no fallback, as
// it is on PATCH: refused for L1 (which needs one), nothing stored for L3.
func TestNullFallbackMeansNone(t *testing.T) {
	dialects(t, func(t *testing.T, svc *Service) {
		ctx := context.Background()
		if _, _, err := svc.CreateSwitch(ctx, admin, "checkout", SwitchInput{Name: "reco", Level: wire.L1, Fallback: []byte("null"), Reason: "r"}); fieldOf(err) != "fallback" {
			t.Fatalf("L1 with a null fallback: %v", err)
		}
		sw, _, err := svc.CreateSwitch(ctx, admin, "checkout", SwitchInput{Name: "reviews", Level: wire.L3, Fallback: []byte(" null "), Reason: "r"})
		if err != nil || sw.Fallback != "" || sw.Wire().Fallback != nil {
			t.Fatalf("L3 with a null fallback: %+v %v", sw, err)
		}
	})
}
