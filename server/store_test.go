package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/internal/pgtest"
	"github.com/switchyard-io/switchyard/sdk/wire"
)

// dialects runs fn once against a fresh Postgres database and once against
// a fresh embedded SQLite database: the same store suite for both.
func dialects(t *testing.T, fn func(t *testing.T, svc *Service)) {
	for _, d := range []string{"postgres", "sqlite"} {
		t.Run(d, func(t *testing.T) {
			url := ""
			if d == "postgres" {
				url = pgtest.NewDatabase(t)
			}
			fn(t, NewService(openDB(t, url), nil))
		})
	}
}

// openDB opens and migrates the database at url (SQLite in a temporary
// directory when url is empty), closed when the test ends.
func openDB(t *testing.T, url string) *gorm.DB {
	t.Helper()
	db, _, err := OpenDB(context.Background(), url, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if sqlDB, err := db.DB(); err == nil {
			sqlDB.Close()
		}
	})
	return db
}

var (
	admin    = Actor{Name: "token:admin", Kind: audit.ActorToken, Role: RoleAdmin}
	viewer   = Actor{Name: "token:viewer", Kind: audit.ActorToken, Role: RoleViewer}
	operator = Actor{Name: "token:ops", Kind: audit.ActorToken, Role: RoleOperator, Apps: []string{"checkout"}}
)

func ptr[T any](v T) *T { return &v }

func count(t *testing.T, db *gorm.DB, table string) int64 {
	t.Helper()
	var n int64
	if err := db.Table(table).Count(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

// fieldOf is the request field an error names: the first bad field of a
// validation error, or the name field of a create whose name is taken.
func fieldOf(err error) string {
	var ve *ValidationError
	var ee *ExistsError
	switch {
	case errors.As(err, &ve):
		return ve.Fields[0].Field
	case errors.As(err, &ee):
		return ee.Field
	}
	return ""
}

func TestSwitchLifecycle(t *testing.T) {
	dialects(t, func(t *testing.T, svc *Service) {
		ctx := context.Background()
		sw, _, err := svc.CreateSwitch(ctx, operator, "checkout", SwitchInput{
			Name: "recommend", Level: wire.L1, Fallback: json.RawMessage(`{"items":[]}`), Reason: "new switch",
		})
		if err != nil {
			t.Fatal(err)
		}
		if sw.Version != 1 || sw.State != wire.StateOff || sw.RolloutBasis != 10000 || sw.MaxOn != "72h" {
			t.Fatalf("created %+v", sw)
		}
		if _, _, err := svc.CreateSwitch(ctx, operator, "checkout", SwitchInput{Name: "recommend", Level: wire.L3, Reason: "again"}); !errors.Is(err, ErrAlreadyExists) {
			t.Fatalf("duplicate: %v", err)
		}
		on, _, err := svc.TurnOn(ctx, operator, "checkout", "recommend", Toggle{Reason: "incident 7", Version: ptr[int64](1), Rollout: &wire.Rollout{Percent: 12.5, Stickiness: wire.StickyKey}})
		if err != nil {
			t.Fatal(err)
		}
		if on.Version != 2 || on.State != wire.StateOn || on.RolloutBasis != 1250 || on.ExpiresAt == nil || on.TurnedOnAt == nil {
			t.Fatalf("on: %+v", on)
		}
		if _, _, err := svc.TurnOff(ctx, operator, "checkout", "recommend", Toggle{Reason: "stale", Version: ptr[int64](1)}); !errors.Is(err, ErrConflict) {
			t.Fatalf("stale version: %v", err)
		}
		// A fallback in a patch replaces the stored one whole: it is the
		// service's payload, not a document the console merges into.
		var replace SwitchPatch
		if err := json.Unmarshal([]byte(`{"reason":"smaller fallback","fallback":{"source":"static"}}`), &replace); err != nil {
			t.Fatal(err)
		}
		if sw, _, err := svc.PatchSwitch(ctx, operator, "checkout", "recommend", replace); err != nil || sw.Fallback != `{"source":"static"}` {
			t.Fatalf("fallback patched to %s (%v), want it replaced", sw.Fallback, err)
		}
		patched, _, err := svc.PatchSwitch(ctx, operator, "checkout", "recommend", SwitchPatch{Reason: "doc", Description: ptr("recommendations"), Level: ptr(wire.L3)})
		if err != nil {
			t.Fatal(err)
		}
		if patched.Level != wire.L3 || patched.Fallback != "" || patched.Description != "recommendations" || patched.Version != 4 {
			t.Fatalf("patched: %+v", patched)
		}
		off, _, err := svc.TurnOff(ctx, operator, "checkout", "recommend", Toggle{Reason: "recovered"})
		if err != nil || off.State != wire.StateOff || off.ExpiresAt != nil {
			t.Fatalf("off: %+v %v", off, err)
		}
		// Roll back to the state right after "on" (event 2).
		events, _, _ := audit.List(ctx, svc.DB(), audit.Filter{Action: "switch.on"})
		back, _, err := svc.RollbackSwitch(ctx, operator, "checkout", "recommend", events[0].ID, Change{Reason: "roll back"})
		if err != nil {
			t.Fatal(err)
		}
		if back.State != wire.StateOn || back.Level != wire.L1 || back.RolloutBasis != 1250 || back.Fallback != `{"items":[]}` {
			t.Fatalf("rolled back: %+v", back)
		}
		if _, err := svc.DeleteSwitch(ctx, operator, "checkout", "recommend", Change{Reason: "gone"}); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.GetSwitch(ctx, "checkout", "recommend"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("after delete: %v", err)
		}
		all, _, _ := audit.List(ctx, svc.DB(), audit.Filter{Target: "switch/checkout/recommend"})
		if len(all) != 7 {
			t.Fatalf("want 7 audit events, got %d", len(all))
		}
		if got := count(t, svc.DB(), "outbox"); got != 7 {
			t.Fatalf("want 7 outbox rows without a publisher, got %d", got)
		}
		res, err := audit.Verify(ctx, svc.DB())
		if err != nil || !res.OK() || res.Events != 7 {
			t.Fatalf("verify: %+v %v", res, err)
		}
	})
}

func TestRejectedChangesWriteNothing(t *testing.T) {
	dialects(t, func(t *testing.T, svc *Service) {
		ctx := context.Background()
		if _, _, err := svc.CreateSwitch(ctx, admin, "checkout", SwitchInput{Name: "search", Level: wire.L3, Reason: "seed"}); err != nil {
			t.Fatal(err)
		}
		big := make([]byte, wire.MaxFallbackBytes+10)
		for i := range big {
			big[i] = ' '
		}
		big[0], big[len(big)-1] = '"', '"'
		cases := []struct {
			name  string
			do    func() error
			field string
			is    error
		}{
			{"unknown level", func() error {
				_, _, err := svc.CreateSwitch(ctx, admin, "checkout", SwitchInput{Name: "a", Level: "L9", Reason: "r"})
				return err
			}, "level", nil},
			{"bad name", func() error {
				_, _, err := svc.CreateSwitch(ctx, admin, "checkout", SwitchInput{Name: "Bad Name", Level: wire.L3, Reason: "r"})
				return err
			}, "name", nil},
			{"L1 without fallback", func() error {
				_, _, err := svc.CreateSwitch(ctx, admin, "checkout", SwitchInput{Name: "a", Level: wire.L1, Reason: "r"})
				return err
			}, "fallback", nil},
			{"fallback too big", func() error {
				_, _, err := svc.CreateSwitch(ctx, admin, "checkout", SwitchInput{Name: "a", Level: wire.L1, Fallback: big, Reason: "r"})
				return err
			}, "fallback", nil},
			{"L2 without staleness", func() error {
				_, _, err := svc.CreateSwitch(ctx, admin, "checkout", SwitchInput{Name: "a", Level: wire.L2, Reason: "r"})
				return err
			}, "max_staleness", nil},
			{"rollout 101", func() error {
				_, _, err := svc.TurnOn(ctx, admin, "checkout", "search", Toggle{Reason: "r", Rollout: &wire.Rollout{Percent: 101}})
				return err
			}, "rollout.percent", nil},
			{"rollout three decimals", func() error {
				_, _, err := svc.TurnOn(ctx, admin, "checkout", "search", Toggle{Reason: "r", Rollout: &wire.Rollout{Percent: 1.005}})
				return err
			}, "rollout.percent", nil},
			{"bad selector", func() error {
				_, _, err := svc.TurnOn(ctx, admin, "checkout", "search", Toggle{Reason: "r", Rollout: &wire.Rollout{Percent: 5, Selector: "zone"}})
				return err
			}, "rollout.selector", nil},
			{"required field not a JSON pointer", func() error {
				_, _, err := svc.CreateSwitch(ctx, admin, "checkout", SwitchInput{Name: "a", Level: wire.L1, Fallback: json.RawMessage(`[]`),
					Verify: &wire.Verify{RequiredFields: []string{"/items", "items/0"}}, Reason: "r"})
				return err
			}, "verify.required_fields[1]", nil},
			{"verify of an L3 switch", func() error {
				_, _, err := svc.PatchSwitch(ctx, admin, "checkout", "search", SwitchPatch{Reason: "r", Verify: &wire.Verify{}})
				return err
			}, "verify", nil},
			{"key list over the limit", func() error {
				keys := make([]string, wire.MaxListKeys+1)
				for i := range keys {
					keys[i] = fmt.Sprint("tenant-", i)
				}
				_, _, err := svc.TurnOn(ctx, admin, "checkout", "search", Toggle{Reason: "r", Rollout: &wire.Rollout{Percent: 5, Include: keys}})
				return err
			}, "rollout.include", nil},
			{"key in include and exclude", func() error {
				_, _, err := svc.PatchSwitch(ctx, admin, "checkout", "search", SwitchPatch{Reason: "r",
					Rollout: &wire.Rollout{Percent: 5, Include: []string{"a", "b"}, Exclude: []string{"b"}}})
				return err
			}, "rollout.exclude[0]", nil},
			{"missing reason", func() error {
				_, _, err := svc.TurnOn(ctx, admin, "checkout", "search", Toggle{})
				return err
			}, "reason", nil},
			{"viewer", func() error {
				_, _, err := svc.TurnOn(ctx, viewer, "checkout", "search", Toggle{Reason: "r"})
				return err
			}, "", ErrForbidden},
			{"operator without grant", func() error {
				_, _, err := svc.CreateSwitch(ctx, operator, "payments", SwitchInput{Name: "a", Level: wire.L3, Reason: "r"})
				return err
			}, "", ErrForbidden},
			{"stale version", func() error {
				_, err := svc.DeleteSwitch(ctx, admin, "checkout", "search", Change{Reason: "r", Version: ptr[int64](7)})
				return err
			}, "", ErrConflict},
			{"bad limit", func() error {
				_, _, err := svc.CreateLimit(ctx, admin, "checkout", LimitInput{LimitRule: wire.LimitRule{Resource: "GET /", Kind: wire.KindTokenBucket, Rate: 10}, Reason: "r"})
				return err
			}, "burst", nil},
		}
		before := [3]int64{count(t, svc.DB(), "switches"), count(t, svc.DB(), "audit_events"), count(t, svc.DB(), "outbox")}
		for _, c := range cases {
			err := c.do()
			if err == nil {
				t.Errorf("%s: accepted", c.name)
				continue
			}
			if c.is != nil && !errors.Is(err, c.is) {
				t.Errorf("%s: got %v, want %v", c.name, err, c.is)
			}
			if c.field != "" && fieldOf(err) != c.field {
				t.Errorf("%s: error %v names %q, want %q", c.name, err, fieldOf(err), c.field)
			}
		}
		after := [3]int64{count(t, svc.DB(), "switches"), count(t, svc.DB(), "audit_events"), count(t, svc.DB(), "outbox")}
		if before != after {
			t.Fatalf("rejected changes wrote rows: before %v after %v", before, after)
		}
	})
}

// TestSwitchKeyListsAndVerify: key lists are stored sorted without
// duplicates and published with the rollout; verify settings of an L1
// switch (its schema included) are stored and published, and dropped by a
// move to L3.
func TestSwitchKeyListsAndVerify(t *testing.T) {
	dialects(t, func(t *testing.T, svc *Service) {
		ctx := context.Background()
		verify := &wire.Verify{Every: wire.Duration(30 * time.Second), RequiredFields: []string{"/items/0/sku"},
			Schema: json.RawMessage(`{"type":"object","required":["items"]}`)}
		if _, _, err := svc.CreateSwitch(ctx, admin, "checkout", SwitchInput{Name: "recs", Level: wire.L1,
			Fallback: json.RawMessage(`{"items":[]}`), Verify: verify, Reason: "new"}); err != nil {
			t.Fatal(err)
		}
		on, _, err := svc.TurnOn(ctx, admin, "checkout", "recs", Toggle{Reason: "tenants first",
			Rollout: &wire.Rollout{Percent: 0, Stickiness: wire.StickyKey, Include: []string{"t-2", "t-1", "t-2"}, Exclude: []string{"audit"}}})
		if err != nil {
			t.Fatal(err)
		}
		got, err := svc.GetSwitch(ctx, "checkout", "recs")
		if err != nil {
			t.Fatal(err)
		}
		w := got.Wire()
		if !slices.Equal(w.Rollout.Include, []string{"t-1", "t-2"}) || !slices.Equal(w.Rollout.Exclude, []string{"audit"}) {
			t.Errorf("published lists %q / %q", w.Rollout.Include, w.Rollout.Exclude)
		}
		if w.Verify == nil || w.Verify.Every != verify.Every || !slices.Equal(w.Verify.RequiredFields, verify.RequiredFields) ||
			string(w.Verify.Schema) != string(verify.Schema) {
			t.Errorf("published verify %+v, want %+v", w.Verify, verify)
		}
		if _, err := wire.DecodeSwitch([]byte(mustJSONString(t, w))); err != nil {
			t.Errorf("published value does not decode: %v", err)
		}
		l3, _, err := svc.PatchSwitch(ctx, admin, "checkout", "recs", SwitchPatch{Reason: "no fallback any more", Level: ptr(wire.L3), Version: &on.Version})
		if err != nil {
			t.Fatal(err)
		}
		if l3.Verify != "" || l3.Wire().Verify != nil {
			t.Errorf("an L3 switch kept verify settings %q", l3.Verify)
		}
	})
}

func mustJSONString(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestLimitRules(t *testing.T) {
	dialects(t, func(t *testing.T, svc *Service) {
		ctx := context.Background()
		r, _, err := svc.CreateLimit(ctx, operator, "checkout", LimitInput{
			LimitRule: wire.LimitRule{Resource: "POST /orders", Kind: wire.KindTokenBucket, Rate: 100, Burst: 20, KeyBy: wire.KeyBy{Source: "header", Name: "X-Tenant"}},
			Reason:    "protect orders",
		})
		if err != nil {
			t.Fatal(err)
		}
		w := r.Wire()
		if w.Mode != wire.ModeEnforce || w.Scope != wire.ScopeInstance || w.Rate != 100 || w.KeyBy.Name != "X-Tenant" || w.Version != 1 {
			t.Fatalf("wire: %+v", w)
		}
		var p LimitPatch
		if err := json.Unmarshal([]byte(`{"reason":"raise","version":1,"rate":250}`), &p); err != nil {
			t.Fatal(err)
		}
		r, _, err = svc.PatchLimit(ctx, operator, "checkout", "POST /orders", p)
		if err != nil {
			t.Fatal(err)
		}
		if w := r.Wire(); w.Rate != 250 || w.Burst != 20 || w.Version != 2 {
			t.Fatalf("patched: %+v", w)
		}
		// Changing the kind drops the old kind's parameters.
		p = LimitPatch{}
		if err := json.Unmarshal([]byte(`{"reason":"to concurrency","kind":"concurrency","max":8}`), &p); err != nil {
			t.Fatal(err)
		}
		r, _, err = svc.PatchLimit(ctx, operator, "checkout", "POST /orders", p)
		if err != nil {
			t.Fatal(err)
		}
		if w := r.Wire(); w.Kind != wire.KindConcurrency || w.Rate != 0 || w.Max != 8 || w.KeyBy.Name != "X-Tenant" {
			t.Fatalf("kind change: %+v", w)
		}
		p = LimitPatch{}
		if err := json.Unmarshal([]byte(`{"reason":"typo","maxx":3}`), &p); err != nil {
			t.Fatal(err)
		}
		if _, _, err := svc.PatchLimit(ctx, operator, "checkout", "POST /orders", p); fieldOf(err) != "maxx" {
			t.Fatalf("unknown field: %v", err)
		}
		off, _, err := svc.SetLimitState(ctx, operator, "checkout", "POST /orders", wire.StateOff, Toggle{Reason: "pause"})
		if err != nil || off.State != wire.StateOff {
			t.Fatalf("off: %+v %v", off, err)
		}
		if _, err := svc.DeleteLimit(ctx, operator, "checkout", "POST /orders", Change{Reason: "done"}); err != nil {
			t.Fatal(err)
		}
		if res, _ := audit.Verify(ctx, svc.DB()); !res.OK() || res.Events != 5 {
			t.Fatalf("verify: %+v", res)
		}
	})
}

func TestTokens(t *testing.T) {
	dialects(t, func(t *testing.T, svc *Service) {
		ctx := context.Background()
		gen, err := svc.EnsureBootstrapToken(ctx, "")
		if err != nil || gen == "" {
			t.Fatalf("bootstrap: %q %v", gen, err)
		}
		if again, err := svc.EnsureBootstrapToken(ctx, ""); err != nil || again != "" {
			t.Fatalf("second start generated another token: %q %v", again, err)
		}
		boot, err := svc.Authenticate(ctx, gen)
		if err != nil || boot.Role != RoleAdmin {
			t.Fatalf("authenticate bootstrap: %+v %v", boot, err)
		}
		secret, tok, err := svc.CreateToken(ctx, boot, TokenInput{Name: "ci", Role: RoleOperator, Apps: []string{"checkout"}, Reason: "ci deploys"})
		if err != nil {
			t.Fatal(err)
		}
		a, err := svc.Authenticate(ctx, secret)
		if err != nil || a.Role != RoleOperator || !a.CanWrite("checkout") || a.CanWrite("payments") {
			t.Fatalf("operator: %+v %v", a, err)
		}
		var stored Token
		svc.DB().First(&stored, tok.ID)
		if stored.TokenHash == secret || stored.TokenHash != hashSecret(secret) {
			t.Fatal("token secret is not stored hashed")
		}
		if _, _, err := svc.CreateToken(ctx, a, TokenInput{Name: "x", Role: RoleAdmin, Reason: "r"}); !errors.Is(err, ErrForbidden) {
			t.Fatalf("operator minted a token: %v", err)
		}
		if err := svc.RevokeToken(ctx, boot, tok.ID, Change{Reason: "leaked"}); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Authenticate(ctx, secret); !errors.Is(err, ErrUnauthorized) {
			t.Fatalf("revoked token authenticates: %v", err)
		}
	})
}

// TestBootstrapTokenRace: two consoles starting at once on a fresh database
// with the same SWITCHYARD_BOOTSTRAP_TOKEN both start; the token is
// recorded once.
func TestBootstrapTokenRace(t *testing.T) {
	db := openDB(t, pgtest.NewDatabase(t))
	const secret = "sy_shared-bootstrap-token"
	// The other console, caught between its insert and its commit.
	other := db.Begin()
	defer other.Rollback()
	if err := other.Create(&Token{Name: "bootstrap", TokenHash: hashSecret(secret), Role: RoleAdmin, CreatedBy: "system", CreatedAt: time.Now()}).Error; err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := NewService(db, nil).EnsureBootstrapToken(context.Background(), secret)
		done <- err
	}()
	// Let it block on the other console's uncommitted row, then commit that.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var waiting int64
		if err := db.Raw("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'").Scan(&waiting).Error; err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the second start never waited for the first")
		}
	}
	if err := other.Commit().Error; err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("second console failed to start: %v", err)
	}
	if n := count(t, db, "api_tokens"); n != 1 {
		t.Fatalf("%d tokens", n)
	}
}

// TestRollbackRefusesDriftEvent: a drift event records the etcd value, not
// the switch; rolling back to it is refused naming the event, and nothing
// is written.
func TestRollbackRefusesDriftEvent(t *testing.T) {
	dialects(t, func(t *testing.T, svc *Service) {
		ctx := context.Background()
		sw, _, err := svc.CreateSwitch(ctx, admin, "checkout", SwitchInput{Name: "pay", Level: wire.L4, Description: "payments", Reason: "r"})
		if err != nil {
			t.Fatal(err)
		}
		ev := SystemActor("reconciler").event("drift", sw.Target(), "key was missing in etcd; republished from the database")
		ev.After = jsonString(sw.Wire())
		if err := svc.DB().Transaction(func(tx *gorm.DB) error { return audit.Append(tx, ev) }); err != nil {
			t.Fatal(err)
		}
		events := count(t, svc.DB(), "audit_events")
		_, _, err = svc.RollbackSwitch(ctx, admin, "checkout", "pay", ev.ID, Change{Reason: "undo"})
		if fieldOf(err) != "event" {
			t.Fatalf("rollback to a drift event: %v", err)
		}
		if got, _ := svc.GetSwitch(ctx, "checkout", "pay"); got.Version != 1 || count(t, svc.DB(), "audit_events") != events {
			t.Fatalf("a refused rollback wrote: %+v", got)
		}
	})
}

// TestSwitchPage: pages follow app and name order on both databases.
func TestSwitchPage(t *testing.T) {
	dialects(t, func(t *testing.T, svc *Service) {
		ctx := context.Background()
		for _, s := range []string{"b/x", "a/y", "a/x", "c/a"} {
			app, name, _ := strings.Cut(s, "/")
			if _, _, err := svc.CreateSwitch(ctx, admin, app, SwitchInput{Name: name, Level: wire.L3, Reason: "r"}); err != nil {
				t.Fatal(err)
			}
		}
		var got []string
		for pg := (Page{Limit: 3}); ; {
			list, next, err := svc.SwitchPage(ctx, "", pg)
			if err != nil {
				t.Fatal(err)
			}
			for _, sw := range list {
				got = append(got, sw.App+"/"+sw.Name)
			}
			got = append(got, "|")
			if pg.After = next; next == "" {
				break
			}
		}
		if s := strings.Join(got, " "); s != "a/x a/y b/x | c/a |" {
			t.Fatalf("pages: %s", s)
		}
	})
}
