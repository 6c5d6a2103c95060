package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"gorm.io/gorm"

	"github.com/switchyard-io/switchyard/audit"
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

// Actor is whoever makes a change: who they are, what they may do, and
// where the request came from or what made a job act (for the audit log).
type Actor struct {
	Name       string
	Kind       string // one of audit.ActorKinds
	Role       Role
	Apps       []string // operator grants; AllApps covers every app
	RequestID  string
	RemoteAddr string
	// Cause names the rule or run a job acts for ("trigger/checkout/cpu-high").
	Cause string
}

// SystemActor is the actor of the console's own bookkeeping (bootstrap,
// reconciler).
func SystemActor(name string) Actor {
	return Actor{Name: name, Kind: audit.ActorSystem, Role: RoleAdmin}
}

// JobActor is the actor of a leader job of kind (audit.ActorTrigger,
// ActorDrill, ActorExpiry or ActorRollout) acting for cause.
func JobActor(kind, cause string) Actor {
	return Actor{Name: kind, Kind: kind, Role: RoleAdmin, Cause: cause}
}

// Person reports whether the actor is a person (a user or an API token)
// rather than the console or one of its jobs.
func (a Actor) Person() bool { return audit.IsPerson(a.Kind) }

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

// mayAdmin refuses everyone but admins; what names what they tried.
func (a Actor) mayAdmin(what string) error {
	if a.Role != RoleAdmin {
		return fmt.Errorf("%w: only admins %s", ErrForbidden, what)
	}
	return nil
}

func (a Actor) event(action audit.Action, target, reason string) *audit.Event {
	return &audit.Event{
		Actor: a.Name, ActorKind: a.Kind, Action: action, Target: target, Cause: a.Cause,
		Reason: strings.TrimSpace(reason), RequestID: a.RequestID, RemoteAddr: a.RemoteAddr,
	}
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
	return t.actor(), nil
}
