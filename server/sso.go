package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	"gorm.io/gorm"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/sdk/wire"
)

// Identity is a person the identity provider vouched for at a single
// sign-on, with the role and grants the mapping rules gave their groups
// (package server/oidc checks the tokens and applies the rules).
type Identity struct {
	// Issuer and Subject identify the person for good: a user is matched
	// by them, never by a name or an email.
	Issuer, Subject string
	// Name is the preferred user name (preferred_username, else the
	// verified email's local part, else the subject); the console makes
	// a valid, unused username of it at the first sign-in.
	Name string
	// Email is "" unless the identity provider verified it.
	Email  string
	Groups []string
	Role   Role
	Apps   []string
	// Why says which rules gave the role, for the audit log.
	Why string
}

func (id Identity) subject() string { return id.Issuer + " " + id.Subject }

// SignInSSO returns the user of id, creating it at the first sign-in and
// otherwise giving it the role, grants and email id carries now: roles
// are recomputed at every sign-in. A change is audited (actor "sso"); a
// changed role ends the user's other sessions. A disabled user is
// refused with ErrForbidden.
func (s *Service) SignInSSO(ctx context.Context, id Identity, remoteAddr string) (*User, error) {
	var v FieldErrors
	if id.Issuer == "" || id.Subject == "" {
		v.Add("sub", "the identity provider named no subject")
	}
	validateGrants(&v, id.Role, id.Apps)
	if err := v.Err(); err != nil {
		return nil, err
	}
	for attempt := 0; ; attempt++ {
		u, err := s.signInSSO(ctx, id, remoteAddr)
		// Two first sign-ins of one person at once: the unique subject
		// lets one create the user; the other finds it.
		if errors.Is(err, ErrAlreadyExists) && attempt == 0 {
			continue
		}
		return u, err
	}
}

func (s *Service) signInSSO(ctx context.Context, id Identity, remoteAddr string) (*User, error) {
	var cur User
	err := s.db.WithContext(ctx).Where("subject = ?", id.subject()).Take(&cur).Error
	switch {
	case errors.Is(err, gorm.ErrRecordNotFound):
		return s.createSSOUser(ctx, id, remoteAddr)
	case err != nil:
		return nil, unavailable(err)
	case cur.Disabled():
		return nil, fmt.Errorf("%w: user %s is disabled", ErrForbidden, cur.Username)
	}
	if id.Role == cur.Role && slices.Equal(id.Apps, cur.Grants()) && id.Email == cur.Email {
		return &cur, nil
	}
	var out *User
	_, err = s.commit(ctx, ssoChange(remoteAddr, audit.UserUpdate, "single sign-on: "+id.Why, func(tx *gorm.DB) (string, any, any, error) {
		// Another change may have come since the row was read.
		var fresh User
		if err := tx.Where("id = ?", cur.ID).Take(&fresh).Error; err != nil {
			return "", nil, nil, err
		}
		if fresh.Disabled() {
			return "", nil, nil, fmt.Errorf("%w: user %s is disabled", ErrForbidden, fresh.Username)
		}
		next := fresh
		next.Role, next.Apps, next.Email, next.UpdatedAt = id.Role, strings.Join(id.Apps, ","), id.Email, s.now()
		out = &next
		return s.saveUser(tx, &fresh, &next)
	}))
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (s *Service) createSSOUser(ctx context.Context, id Identity, remoteAddr string) (*User, error) {
	now := s.now()
	sub := id.subject()
	u := &User{
		Role: id.Role, Apps: strings.Join(id.Apps, ","), Source: UserSSO, Subject: &sub, Email: id.Email,
		PasswordChangedAt: now, CreatedBy: "sso", CreatedAt: now, UpdatedAt: now,
	}
	_, err := s.commit(ctx, ssoChange(remoteAddr, audit.UserCreate, "first single sign-on: "+id.Why, func(tx *gorm.DB) (string, any, any, error) {
		name, err := freeUsername(tx, id)
		if err != nil {
			return "", nil, nil, err
		}
		u.Username = name
		return insertUser(tx, u)
	}))
	if err != nil {
		return nil, err
	}
	return u, nil
}

// UserBySubject returns the single sign-on user of issuer and subject, or
// ErrNotFound.
func (s *Service) UserBySubject(ctx context.Context, issuer, subject string) (*User, error) {
	var u User
	err := s.db.WithContext(ctx).Where("subject = ?", Identity{Issuer: issuer, Subject: subject}.subject()).Take(&u).Error
	return &u, mapDBError(err)
}

// ssoChange is a change of a user made by a single sign-on: the identity
// provider vouched for the person and the mapping rules gave the role, so
// it authorizes itself.
func ssoChange(remoteAddr string, action audit.Action, reason string, apply func(tx *gorm.DB) (string, any, any, error)) change {
	a := Actor{Name: "sso", Kind: audit.ActorSystem, Role: RoleAdmin, RemoteAddr: remoteAddr}
	return change{Actor: a, Action: action, Reason: reason, Authorize: func(Actor) error { return nil }, Apply: apply}
}

// freeUsername makes a valid username of id.Name that no other user has:
// the name itself, or the name with a suffix from the subject. A local
// account of the same name is never taken over.
func freeUsername(tx *gorm.DB, id Identity) (string, error) {
	sum := sha256.Sum256([]byte(id.subject()))
	suffix := hex.EncodeToString(sum[:3])
	base := usernameOf(id.Name)
	if base == "" {
		base = "sso-" + suffix
	}
	for _, name := range []string{base, trimName(base, len(suffix)+1) + "-" + suffix} {
		var n int64
		if err := tx.Model(&User{}).Where("username = ?", name).Count(&n).Error; err != nil {
			return "", err
		}
		if n == 0 {
			return name, nil
		}
	}
	return "", fmt.Errorf("%w: user name %s and its variant are taken", ErrAlreadyExists, base)
}

// usernameOf turns a preferred name into a username
// (^[a-z0-9][a-z0-9._-]{0,62}$), or "" when nothing of it is usable.
func usernameOf(name string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(name)) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	out := strings.TrimLeft(b.String(), "._-")
	out = trimName(out, 0)
	if !wire.ValidName(out) {
		return ""
	}
	return out
}

// trimName cuts name so that reserve more characters still fit a username.
func trimName(name string, reserve int) string {
	if max := 63 - reserve; len(name) > max {
		return name[:max]
	}
	return name
}

// LocalSignIn is a sign-in with a password while single sign-on is
// configured: break-glass. It is audited (user.signin, with the reason the
// person gave) and inTx runs in the same transaction (the caller enqueues
// the notification there).
func (s *Service) LocalSignIn(ctx context.Context, u *User, remoteAddr, reason string, inTx func(tx *gorm.DB) error) error {
	a := u.Actor()
	a.RemoteAddr = remoteAddr
	_, err := s.commit(ctx, change{
		Actor: a, Action: audit.UserSignIn, Reason: reason,
		Authorize: func(Actor) error { return nil },
		Apply: func(tx *gorm.DB) (string, any, any, error) {
			return u.Target(), nil, nil, inTx(tx)
		},
	})
	return err
}
