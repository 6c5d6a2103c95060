package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/switchyard-io/switchyard/audit"
)

// This file is the one audited change path. Every change to a switch, a
// limit rule, a token or a user — by a person, a token or a leader job —
// is a change value committed here: authorized, validated, written with
// its audit event (and, for what etcd carries, an outbox row) in one
// transaction, then awaited until etcd has it.

// Receipt tells whether a committed change already reached etcd.
type Receipt struct {
	Published bool  `json:"published"`
	Revision  int64 `json:"revision"`
}

// outboxRow marks an entity whose current state must be published.
type outboxRow struct {
	ID        int64 `gorm:"primaryKey"`
	Kind      string
	App       string
	Name      string
	CreatedAt time.Time
}

func (outboxRow) TableName() string { return "outbox" }

// Outbox kinds.
const (
	outboxSwitch = "switch"
	outboxLimit  = "limit"
)

// change is one audited mutation.
type change struct {
	Actor  Actor
	Action audit.Action
	Reason string
	// Publish is the entity whose etcd key follows the change; the zero
	// value for changes etcd does not carry (tokens, users).
	Publish entityKey
	// Authorize checks the actor's right to make the change; nil means
	// the actor must be allowed to write Publish's app.
	Authorize func(Actor) error
	// Apply runs inside the transaction and returns the audit target and
	// the entity before and after (nil when absent).
	Apply func(tx *gorm.DB) (target string, before, after any, err error)
}

// commit runs a change in its own transaction and waits for its
// publication.
func (s *Service) commit(ctx context.Context, c change) (Receipt, error) {
	var ob *outboxRow
	err := s.tx(ctx, func(tx *gorm.DB) (err error) {
		ob, err = s.record(tx, c)
		return err
	})
	if err != nil {
		return Receipt{}, err
	}
	return s.await(ctx, ob), nil
}

// record applies a change inside tx: it authorizes and validates it, runs
// Apply, appends the audit event and the outbox row, and tells the hooks
// of a person's change. It returns the outbox row (nil when the change
// publishes nothing).
func (s *Service) record(tx *gorm.DB, c change) (*outboxRow, error) {
	authorize := c.Authorize
	if authorize == nil {
		authorize = func(a Actor) error { return a.mayWrite(c.Publish.app) }
	}
	if err := authorize(c.Actor); err != nil {
		return nil, err
	}
	if err := validateReason(c.Reason); err != nil {
		return nil, err
	}
	target, before, after, err := c.Apply(tx)
	if err != nil {
		return nil, err
	}
	ev := c.Actor.event(c.Action, target, c.Reason)
	ev.Before, ev.After = jsonString(before), jsonString(after)
	if err := audit.Append(tx, ev); err != nil {
		return nil, err
	}
	if c.Publish == (entityKey{}) {
		return nil, nil
	}
	ob := &outboxRow{Kind: c.Publish.kind, App: c.Publish.app, Name: c.Publish.name, CreatedAt: s.now()}
	if err := tx.Create(ob).Error; err != nil {
		return nil, err
	}
	return ob, nil
}

// await waits for the publication of ob (none: nothing to wait for).
func (s *Service) await(ctx context.Context, ob *outboxRow) Receipt {
	if ob == nil || s.pub == nil {
		return Receipt{}
	}
	return s.pub.Await(ctx, ob)
}

// tx runs fn in a transaction and maps database errors to the package's
// typed errors.
func (s *Service) tx(ctx context.Context, fn func(tx *gorm.DB) error) error {
	return mapDBError(s.db.WithContext(ctx).Transaction(fn))
}

// mapDBError turns database errors into the package's typed errors; typed
// errors pass through.
func mapDBError(err error) error {
	var ve *ValidationError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ve), errors.Is(err, ErrConflict), errors.Is(err, ErrForbidden),
		errors.Is(err, ErrNotFound), errors.Is(err, ErrAlreadyExists), errors.Is(err, ErrUnavailable):
		return err
	case errors.Is(err, gorm.ErrRecordNotFound):
		return ErrNotFound
	case errors.Is(err, gorm.ErrDuplicatedKey), strings.Contains(err.Error(), "UNIQUE constraint failed"):
		return ErrAlreadyExists
	case errors.Is(err, context.Canceled):
		return err // the caller went away; nobody reads the answer
	}
	// Including context.DeadlineExceeded: a database that does not answer
	// within the request's time is unavailable to it.
	return unavailable(err)
}

func unavailable(err error) error { return fmt.Errorf("%w: %w", ErrUnavailable, err) }

func jsonString(v any) string {
	if v == nil {
		return ""
	}
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}

// checkVersion compares the caller's expected version with the stored one.
func checkVersion(expected *int64, current int64) error {
	if expected != nil && *expected != current {
		return fmt.Errorf("%w: version %d is stale, current is %d", ErrConflict, *expected, current)
	}
	return nil
}
