package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/sdk/wire"
)

// Role is what a principal may do.
type Role string

// Roles, from least to most powerful.
const (
	RoleViewer   Role = "viewer"   // reads everything
	RoleOperator Role = "operator" // changes the apps it is granted
	RoleAdmin    Role = "admin"    // changes everything, mints tokens
)

// Valid reports whether r is a known role.
func (r Role) Valid() bool { return r == RoleViewer || r == RoleOperator || r == RoleAdmin }

// AllApps is the grant that covers every app.
const AllApps = "*"

// Actor is whoever makes a request: who they are, what they may do, and
// where the request came from (for the audit log).
type Actor struct {
	Name       string
	Kind       string // audit.ActorUser, audit.ActorToken or audit.ActorSystem
	Role       Role
	Apps       []string // operator grants; AllApps covers every app
	RequestID  string
	RemoteAddr string
}

// SystemActor is the actor of background jobs.
func SystemActor(name string) Actor {
	return Actor{Name: name, Kind: audit.ActorSystem, Role: RoleAdmin}
}

// CanWrite reports whether the actor may change app's switches and rules.
func (a Actor) CanWrite(app string) bool {
	switch a.Role {
	case RoleAdmin:
		return true
	case RoleOperator:
		return slices.Contains(a.Apps, AllApps) || slices.Contains(a.Apps, app)
	}
	return false
}

func (a Actor) mayWrite(app string) error {
	if !a.CanWrite(app) {
		if a.Role == RoleOperator {
			return fmt.Errorf("%w: no grant for app %q", ErrForbidden, app)
		}
		return fmt.Errorf("%w: role %s cannot change anything", ErrForbidden, a.Role)
	}
	return nil
}

func (a Actor) event(action, target, reason string) *audit.Event {
	return &audit.Event{
		Actor: a.Name, ActorKind: a.Kind, Action: action, Target: target,
		Reason: strings.TrimSpace(reason), RequestID: a.RequestID, RemoteAddr: a.RemoteAddr,
	}
}

// Token is an API token as stored: only the SHA-256 of the secret is kept.
type Token struct {
	ID        int64     `gorm:"primaryKey" json:"id"`
	Name      string    `json:"name"`
	TokenHash string    `json:"-"`
	Role      Role      `json:"role"`
	Apps      string    `json:"-"`
	CreatedBy string    `json:"created_by"`
	CreatedAt time.Time `json:"created_at"`
	// RevokedAt is set once the token is revoked; it then authenticates nothing.
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
}

// TableName pins the table name.
func (Token) TableName() string { return "api_tokens" }

// Grants returns the apps an operator token may change.
func (t *Token) Grants() []string {
	if t.Apps == "" {
		return nil
	}
	return strings.Split(t.Apps, ",")
}

// TokenView is the API representation of a token (never the secret).
type TokenView struct {
	Token
	GrantedApps []string `json:"apps"`
}

// View returns the API representation.
func (t *Token) View() TokenView { return TokenView{Token: *t, GrantedApps: t.Grants()} }

// TokenInput mints a token.
type TokenInput struct {
	Name   string   `json:"name"`
	Role   Role     `json:"role"`
	Apps   []string `json:"apps"`
	Reason string   `json:"reason"`
}

const tokenPrefix = "sy_"

// NewSecret returns a fresh random token secret.
func NewSecret() string {
	var b [24]byte
	_, _ = rand.Read(b[:])
	return tokenPrefix + base64.RawURLEncoding.EncodeToString(b[:])
}

func hashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// Authenticate resolves a bearer secret to its actor.
func (s *Service) Authenticate(ctx context.Context, secret string) (Actor, error) {
	if secret == "" {
		return Actor{}, ErrUnauthorized
	}
	var t Token
	err := s.db.WithContext(ctx).Where("token_hash = ? AND revoked_at IS NULL", hashSecret(secret)).Take(&t).Error
	switch {
	case errors.Is(err, gorm.ErrRecordNotFound):
		return Actor{}, ErrUnauthorized
	case err != nil:
		return Actor{}, unavailable(err)
	}
	return Actor{Name: "token:" + t.Name, Kind: audit.ActorToken, Role: t.Role, Apps: t.Grants()}, nil
}

// CreateToken mints a token; the secret is returned once and never stored.
func (s *Service) CreateToken(ctx context.Context, a Actor, in TokenInput) (string, *Token, error) {
	if a.Role != RoleAdmin {
		return "", nil, fmt.Errorf("%w: only admins mint tokens", ErrForbidden)
	}
	var v validator
	if !wire.ValidName(in.Name) {
		v.add("name", "must match ^[a-z0-9][a-z0-9._-]{0,62}$")
	}
	validateGrants(&v, in.Role, in.Apps)
	if err := v.err(); err != nil {
		return "", nil, err
	}
	if err := validateReason(in.Reason); err != nil {
		return "", nil, err
	}
	secret := NewSecret()
	t := &Token{
		Name: in.Name, TokenHash: hashSecret(secret), Role: in.Role,
		Apps: strings.Join(in.Apps, ","), CreatedBy: a.Name, CreatedAt: s.now(),
	}
	ev := a.event("token.create", "token/"+t.Name, in.Reason)
	err := s.tx(ctx, func(tx *gorm.DB) error {
		if err := tx.Create(t).Error; err != nil {
			return err
		}
		ev.After = jsonString(t.View())
		return audit.Append(tx, ev)
	})
	if err != nil {
		return "", nil, err
	}
	return secret, t, nil
}

// ListTokens returns every token, newest first.
func (s *Service) ListTokens(ctx context.Context) ([]Token, error) {
	var ts []Token
	if err := s.db.WithContext(ctx).Order("id DESC").Find(&ts).Error; err != nil {
		return nil, unavailable(err)
	}
	return ts, nil
}

// RevokeToken revokes a token by id.
func (s *Service) RevokeToken(ctx context.Context, a Actor, id int64, c Change) error {
	if a.Role != RoleAdmin {
		return fmt.Errorf("%w: only admins revoke tokens", ErrForbidden)
	}
	if err := validateReason(c.Reason); err != nil {
		return err
	}
	return s.tx(ctx, func(tx *gorm.DB) error {
		var t Token
		if err := tx.Where("id = ?", id).Take(&t).Error; err != nil {
			return err
		}
		if t.RevokedAt != nil {
			return fmt.Errorf("%w: token already revoked", ErrNotFound)
		}
		before := jsonString(t.View())
		now := s.now()
		t.RevokedAt = &now
		if err := tx.Model(&t).Update("revoked_at", now).Error; err != nil {
			return err
		}
		ev := a.event("token.revoke", "token/"+t.Name, c.Reason)
		ev.Before, ev.After = before, jsonString(t.View())
		return audit.Append(tx, ev)
	})
}

// EnsureBootstrapToken makes sure an admin can sign in on first start.
// With a configured secret it records that secret as the "bootstrap" admin
// token (once, even when several consoles start together). Without one it
// generates a secret only if no admin token exists yet, and returns it so
// the caller can print it; otherwise "".
func (s *Service) EnsureBootstrapToken(ctx context.Context, configured string) (generated string, err error) {
	secret := configured
	err = s.tx(ctx, func(tx *gorm.DB) error {
		if configured != "" {
			var n int64
			if err := tx.Model(&Token{}).Where("token_hash = ?", hashSecret(configured)).Count(&n).Error; err != nil || n > 0 {
				return err
			}
		} else {
			var n int64
			if err := tx.Model(&Token{}).Where("role = ? AND revoked_at IS NULL", RoleAdmin).Count(&n).Error; err != nil || n > 0 {
				return err
			}
			secret = NewSecret()
			generated = secret
		}
		t := &Token{Name: "bootstrap", TokenHash: hashSecret(secret), Role: RoleAdmin, CreatedBy: "system", CreatedAt: s.now()}
		if err := tx.Create(t).Error; err != nil {
			return err
		}
		ev := SystemActor("system").event("token.create", "token/bootstrap", "bootstrap admin token")
		ev.After = jsonString(t.View())
		return audit.Append(tx, ev)
	})
	if configured != "" && errors.Is(err, ErrAlreadyExists) {
		return "", nil // another console recorded the same secret first
	}
	if err != nil {
		return "", err
	}
	return generated, nil
}
