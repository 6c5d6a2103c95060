package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/sdk/wire"
)

// Token is an API token as stored: only the SHA-256 of the secret is kept.
// Names are unique among tokens that are not revoked.
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

// Target is how the audit log names the token.
func (t *Token) Target() string { return "token/" + t.Name }

// Grants returns the apps an operator token may change.
func (t *Token) Grants() []string {
	if t.Apps == "" {
		return nil
	}
	return strings.Split(t.Apps, ",")
}

// actor is the token as the actor of a request. Its name carries the id
// ("token:ci#7"), so the audit log tells apart tokens that shared a name
// at different times.
func (t *Token) actor() Actor {
	return Actor{Name: "token:" + t.Name + "#" + strconv.FormatInt(t.ID, 10), Kind: audit.ActorToken, Role: t.Role, Apps: t.Grants()}
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

// BootstrapTokenName names the admin token from SWITCHYARD_BOOTSTRAP_TOKEN
// (or generated on first start).
const BootstrapTokenName = "bootstrap"

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

// tokenChange is the audited change of a token: admins only, nothing to
// publish.
func tokenChange(a Actor, action audit.Action, reason string, apply func(tx *gorm.DB) (string, any, any, error)) change {
	return change{
		Actor: a, Action: action, Reason: reason,
		Authorize: func(a Actor) error { return a.mayAdmin("manage tokens") },
		Apply:     apply,
	}
}

// insertToken adds t; a name taken by an active token is an ExistsError
// on field "name".
func insertToken(tx *gorm.DB, t *Token) (string, any, any, error) {
	var n int64
	if err := tx.Model(&Token{}).Where("name = ? AND revoked_at IS NULL", t.Name).Count(&n).Error; err != nil {
		return "", nil, nil, err
	}
	if n > 0 {
		return "", nil, nil, &ExistsError{Field: "name", Name: "token " + t.Name}
	}
	if err := tx.Create(t).Error; err != nil {
		return "", nil, nil, err
	}
	return t.Target(), nil, t.View(), nil
}

// CreateToken mints a token; the secret is returned once and never stored.
func (s *Service) CreateToken(ctx context.Context, a Actor, in TokenInput) (string, *Token, error) {
	secret := NewSecret()
	t := &Token{
		Name: in.Name, TokenHash: hashSecret(secret), Role: in.Role,
		Apps: strings.Join(in.Apps, ","), CreatedBy: a.Name, CreatedAt: s.now(),
	}
	_, err := s.commit(ctx, tokenChange(a, audit.TokenCreate, in.Reason, func(tx *gorm.DB) (string, any, any, error) {
		var v FieldErrors
		if !wire.ValidName(in.Name) {
			v.Add("name", "must match ^[a-z0-9][a-z0-9._-]{0,62}$")
		}
		validateGrants(&v, in.Role, in.Apps)
		if err := v.Err(); err != nil {
			return "", nil, nil, err
		}
		return insertToken(tx, t)
	}))
	if err != nil {
		return "", nil, err
	}
	return secret, t, nil
}

// ListTokens returns one page of the tokens, newest first (Page{}: all),
// and the cursor of the next page.
func (s *Service) ListTokens(ctx context.Context, pg Page) ([]Token, string, error) {
	q, err := pg.Newest(s.db.WithContext(ctx), "id")
	if err != nil {
		return nil, "", err
	}
	var ts []Token
	if err := q.Find(&ts).Error; err != nil {
		return nil, "", unavailable(err)
	}
	ts, next := Cut(ts, pg, func(t *Token) string { return IDKey(t.ID) })
	return ts, next, nil
}

// RevokeToken revokes a token by id. Tokens have no version: a change
// naming one is refused.
func (s *Service) RevokeToken(ctx context.Context, a Actor, id int64, c Change) error {
	_, err := s.commit(ctx, tokenChange(a, audit.TokenRevoke, c.Reason, func(tx *gorm.DB) (string, any, any, error) {
		var v FieldErrors
		refuseVersion(&v, "tokens", c.Version)
		if err := v.Err(); err != nil {
			return "", nil, nil, err
		}
		var t Token
		if err := tx.Where("id = ?", id).Take(&t).Error; err != nil {
			if errors.Is(err, gorm.ErrRecordNotFound) {
				return "", nil, nil, fmt.Errorf("%w: token %d", ErrNotFound, id)
			}
			return "", nil, nil, err
		}
		if t.RevokedAt != nil {
			return "", nil, nil, fmt.Errorf("%w: token %d is already revoked", ErrNotFound, id)
		}
		return revokeToken(tx, &t, s.now())
	}))
	return err
}

func revokeToken(tx *gorm.DB, t *Token, now time.Time) (string, any, any, error) {
	before := t.View()
	t.RevokedAt = &now
	if err := tx.Model(t).Update("revoked_at", now).Error; err != nil {
		return "", nil, nil, err
	}
	return t.Target(), before, t.View(), nil
}

// EnsureBootstrapToken makes sure an admin can sign in on first start.
//
// With a configured secret, that secret is the "bootstrap" admin token:
// recorded once (even when several consoles start together). A changed
// secret rotates it: the active bootstrap token is revoked and the new one
// recorded, both audited, so exactly one bootstrap token works. A secret
// whose token was revoked stays revoked.
//
// Without one it generates a secret only if no admin token exists yet, and
// returns it so the caller can print it; otherwise "".
func (s *Service) EnsureBootstrapToken(ctx context.Context, configured string) (generated string, err error) {
	system := SystemActor("system")
	secret := configured
	err = s.tx(ctx, func(tx *gorm.DB) error {
		var n int64
		if configured != "" {
			if err := tx.Model(&Token{}).Where("token_hash = ?", hashSecret(configured)).Count(&n).Error; err != nil || n > 0 {
				return err
			}
			var old []Token
			if err := tx.Where("name = ? AND revoked_at IS NULL", BootstrapTokenName).Find(&old).Error; err != nil {
				return err
			}
			for i := range old {
				revoke := tokenChange(system, audit.TokenRevoke, "bootstrap token rotated: SWITCHYARD_BOOTSTRAP_TOKEN holds a new secret",
					func(tx *gorm.DB) (string, any, any, error) { return revokeToken(tx, &old[i], s.now()) })
				if _, err := s.record(tx, revoke); err != nil {
					return err
				}
			}
		} else {
			if err := tx.Model(&Token{}).Where("role = ? AND revoked_at IS NULL", RoleAdmin).Count(&n).Error; err != nil || n > 0 {
				return err
			}
			secret = NewSecret()
			generated = secret
		}
		t := &Token{Name: BootstrapTokenName, TokenHash: hashSecret(secret), Role: RoleAdmin, CreatedBy: system.Name, CreatedAt: s.now()}
		_, err := s.record(tx, tokenChange(system, audit.TokenCreate, "bootstrap admin token",
			func(tx *gorm.DB) (string, any, any, error) { return insertToken(tx, t) }))
		return err
	})
	if configured != "" && errors.Is(err, ErrAlreadyExists) {
		return "", nil // another console recorded the same secret first
	}
	if err != nil {
		return "", err
	}
	return generated, nil
}
