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

// Service is the transactional change path. Every change validates its
// input, then in one transaction writes the entity (version+1), appends the
// audit event and adds an outbox row; after commit it waits briefly for the
// publisher so the caller can say whether etcd already has the change.
type Service struct {
	db  *gorm.DB
	pub *Publisher
	now func() time.Time
}

// NewService returns a service on db publishing through pub (nil: changes
// stay in the outbox for another console's publisher).
func NewService(db *gorm.DB, pub *Publisher) *Service {
	return &Service{db: db, pub: pub, now: func() time.Time { return time.Now().UTC() }}
}

// DB returns the underlying database handle (for audit queries and health).
func (s *Service) DB() *gorm.DB { return s.db }

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

// tx runs fn in a transaction and maps database errors to the package's
// typed errors.
func (s *Service) tx(ctx context.Context, fn func(tx *gorm.DB) error) error {
	return mapDBError(s.db.WithContext(ctx).Transaction(fn))
}

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

// change is one audited, published mutation.
type change struct {
	actor  Actor
	action string
	reason string
	kind   string // outbox kind
	app    string
	name   string
	// apply runs inside the transaction and returns the audit target and the
	// entity before and after (nil when absent).
	apply func(tx *gorm.DB) (target string, before, after any, err error)
}

// commit runs a change and waits for its publication.
func (s *Service) commit(ctx context.Context, c change) (Receipt, error) {
	if err := c.actor.mayWrite(c.app); err != nil {
		return Receipt{}, err
	}
	if err := validateReason(c.reason); err != nil {
		return Receipt{}, err
	}
	ob := &outboxRow{Kind: c.kind, App: c.app, Name: c.name}
	err := s.tx(ctx, func(tx *gorm.DB) error {
		target, before, after, err := c.apply(tx)
		if err != nil {
			return err
		}
		ev := c.actor.event(c.action, target, c.reason)
		ev.Before, ev.After = jsonString(before), jsonString(after)
		if err := audit.Append(tx, ev); err != nil {
			return err
		}
		ob.CreatedAt = s.now()
		return tx.Create(ob).Error
	})
	if err != nil {
		return Receipt{}, err
	}
	if s.pub == nil {
		return Receipt{}, nil
	}
	return s.pub.Await(ctx, ob), nil
}

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

// ListSwitches returns the switches of app (all apps when app is "").
func (s *Service) ListSwitches(ctx context.Context, app string) ([]Switch, error) {
	out, _, err := s.SwitchPage(ctx, app, Page{})
	return out, err
}

// SwitchPage returns one page of ListSwitches and the cursor of the next.
func (s *Service) SwitchPage(ctx context.Context, app string, pg Page) ([]Switch, string, error) {
	return list[Switch](s.db.WithContext(ctx), app, pg)
}

// GetSwitch returns one switch.
func (s *Service) GetSwitch(ctx context.Context, app, name string) (*Switch, error) {
	sw, err := load[Switch](s.db.WithContext(ctx), app, name)
	return sw, mapDBError(err)
}

// CreateSwitch creates a switch in state off.
func (s *Service) CreateSwitch(ctx context.Context, a Actor, app string, in SwitchInput) (*Switch, Receipt, error) {
	return create(s, ctx, a, outboxSwitch, app, in.Name, "switch.create", in.Reason, func() (*Switch, error) {
		return newSwitch(app, &in)
	})
}

// updateSwitch is update for switches.
func (s *Service) updateSwitch(ctx context.Context, a Actor, app, name, action, reason string, expected *int64, mutate func(sw *Switch) error) (*Switch, Receipt, error) {
	return update(s, ctx, a, outboxSwitch, app, name, action, reason, expected, mutate)
}

// PatchSwitch changes descriptive and per-level fields.
func (s *Service) PatchSwitch(ctx context.Context, a Actor, app, name string, p SwitchPatch) (*Switch, Receipt, error) {
	return s.updateSwitch(ctx, a, app, name, "switch.update", p.Reason, p.Version, p.apply)
}

// TurnOn puts a switch on, optionally with a new rollout, and sets its
// expiry from max_on.
func (s *Service) TurnOn(ctx context.Context, a Actor, app, name string, t Toggle) (*Switch, Receipt, error) {
	return s.updateSwitch(ctx, a, app, name, "switch.on", t.Reason, t.Version, func(sw *Switch) error {
		if t.Rollout != nil {
			if err := sw.setRollout(*t.Rollout); err != nil {
				return err
			}
		}
		sw.turnOn(s.now())
		return nil
	})
}

// TurnOff puts a switch off.
func (s *Service) TurnOff(ctx context.Context, a Actor, app, name string, t Toggle) (*Switch, Receipt, error) {
	if t.Rollout != nil {
		return nil, Receipt{}, invalid("rollout", "is only accepted when turning a switch on")
	}
	return s.updateSwitch(ctx, a, app, name, "switch.off", t.Reason, t.Version, func(sw *Switch) error {
		sw.turnOff()
		return nil
	})
}

// DeleteSwitch deletes a switch; its etcd key is removed by the publisher.
func (s *Service) DeleteSwitch(ctx context.Context, a Actor, app, name string, c Change) (Receipt, error) {
	return remove[Switch](s, ctx, a, outboxSwitch, app, name, "switch.delete", c)
}
