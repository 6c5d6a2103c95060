package server

import (
	"context"
	"errors"
	"testing"
)

func TestUsers(t *testing.T) {
	dialects(t, func(t *testing.T, svc *Service) {
		ctx := context.Background()
		db := svc.DB()
		const bootstrap = "bootstrap-secret-for-users-test"
		if _, err := svc.EnsureBootstrapToken(ctx, bootstrap); err != nil {
			t.Fatal(err)
		}

		// The bootstrap token signs in as "admin" only while no user exists.
		if _, err := svc.SignIn(ctx, "admin", "wrong-token-value"); !errors.Is(err, ErrUnauthorized) {
			t.Fatalf("bootstrap with a wrong token: %v", err)
		}
		if _, err := svc.SignIn(ctx, "root", bootstrap); !errors.Is(err, ErrUnauthorized) {
			t.Fatalf("bootstrap under another name: %v", err)
		}
		adm, err := svc.SignIn(ctx, "admin", bootstrap)
		if err != nil || adm.Role != RoleAdmin {
			t.Fatalf("bootstrap sign-in: %v %+v", err, adm)
		}
		if _, err := svc.SignIn(ctx, "admin", bootstrap); err != nil {
			t.Fatalf("admin signs in again with the same password: %v", err)
		}
		a := adm.Actor()

		events, users := count(t, db, "audit_events"), count(t, db, "users")
		for _, tc := range []struct {
			name  string
			actor Actor
			in    UserInput
			field string
			err   error
		}{
			{"viewer", viewer, UserInput{Username: "x", Password: "0123456789", Role: RoleViewer, Reason: "r"}, "", ErrForbidden},
			{"operator", operator, UserInput{Username: "x", Password: "0123456789", Role: RoleViewer, Reason: "r"}, "", ErrForbidden},
			{"bad name", a, UserInput{Username: "Bad Name", Password: "0123456789", Role: RoleViewer, Reason: "r"}, "username", nil},
			{"short password", a, UserInput{Username: "x", Password: "short", Role: RoleViewer, Reason: "r"}, "password", nil},
			{"unknown role", a, UserInput{Username: "x", Password: "0123456789", Role: "root", Reason: "r"}, "role", nil},
			{"operator without apps", a, UserInput{Username: "x", Password: "0123456789", Role: RoleOperator, Reason: "r"}, "apps", nil},
			{"viewer with apps", a, UserInput{Username: "x", Password: "0123456789", Role: RoleViewer, Apps: []string{"a"}, Reason: "r"}, "apps", nil},
			{"bad app", a, UserInput{Username: "x", Password: "0123456789", Role: RoleOperator, Apps: []string{"A B"}, Reason: "r"}, "apps[0]", nil},
			{"no reason", a, UserInput{Username: "x", Password: "0123456789", Role: RoleViewer}, "reason", nil},
			{"taken", a, UserInput{Username: "admin", Password: "0123456789", Role: RoleViewer, Reason: "r"}, "username", nil},
		} {
			_, err := svc.CreateUser(ctx, tc.actor, tc.in)
			if tc.err != nil && !errors.Is(err, tc.err) || tc.err == nil && fieldOf(err) != tc.field {
				t.Errorf("%s: %v (field %q), want %v / field %q", tc.name, err, fieldOf(err), tc.err, tc.field)
			}
		}
		if count(t, db, "audit_events") != events || count(t, db, "users") != users {
			t.Fatal("a rejected user change wrote something")
		}

		if _, err := svc.CreateUser(ctx, a, UserInput{Username: "olga", Password: "olga-password-1", Role: RoleOperator, Apps: []string{"checkout"}, Reason: "on call"}); err != nil {
			t.Fatal(err)
		}
		u, err := svc.SignIn(ctx, "olga", "olga-password-1")
		if err != nil || !u.Actor().CanWrite("checkout") || u.Actor().CanWrite("search") {
			t.Fatalf("olga: %v %+v", err, u)
		}
		if _, err := svc.SignIn(ctx, "olga", "olga-password-2"); !errors.Is(err, ErrUnauthorized) {
			t.Errorf("wrong password: %v", err)
		}
		if err := svc.ChangeOwnPassword(ctx, u.Actor(), "nope-nope-nope", "olga-password-2"); fieldOf(err) != "current" {
			t.Errorf("change with a wrong current password: %v", err)
		}
		if err := svc.ChangeOwnPassword(ctx, u.Actor(), "olga-password-1", "olga-password-2"); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.SignIn(ctx, "olga", "olga-password-2"); err != nil {
			t.Errorf("new password: %v", err)
		}
		if _, err := svc.UpdateUser(ctx, a, "olga", UserPatch{Disabled: ptr(true), Reason: "left"}); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.SignIn(ctx, "olga", "olga-password-2"); !errors.Is(err, ErrUnauthorized) {
			t.Errorf("disabled user signs in: %v", err)
		}
		if _, err := svc.UpdateUser(ctx, a, "admin", UserPatch{Role: ptr(RoleViewer), Reason: "oops"}); fieldOf(err) != "role" {
			t.Errorf("admin demotes themselves: %v", err)
		}
		if _, err := svc.UpdateUser(ctx, a, "nobody", UserPatch{Reason: "r"}); !errors.Is(err, ErrNotFound) {
			t.Errorf("update a missing user: %v", err)
		}
		var acts []string
		db.Table("audit_events").Where("target LIKE 'user/%'").Order("id").Pluck("action", &acts)
		want := []string{"user.create", "user.create", "user.password", "user.update"}
		if len(acts) != len(want) {
			t.Fatalf("user audit events %v, want %v", acts, want)
		}
		for i := range want {
			if acts[i] != want[i] {
				t.Errorf("user audit events %v, want %v", acts, want)
			}
		}
		var leaked int64
		db.Table("audit_events").Where("after LIKE '%password_hash%' OR after LIKE '%$2a$%'").Count(&leaked)
		if leaked != 0 {
			t.Error("a password hash reached the audit log")
		}
	})
}
