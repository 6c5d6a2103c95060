package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/switchyard-io/switchyard/audit"
)

// Record is the bookkeeping every versioned entity carries (embedded so
// gorm maps its columns).
type Record struct {
	ID        int64 `gorm:"primaryKey"`
	Version   int64 // optimistic concurrency: +1 on every change
	Reason    string
	UpdatedBy string
	UpdatedAt time.Time
	CreatedAt time.Time
}

func (r *Record) base() *Record { return r }

// versioned is a stored entity the change path creates, updates and
// deletes: switches and limit rules.
type versioned interface {
	base() *Record
	Target() string
	describe() any      // the API view recorded in audit events
	nameColumn() string // the column that names it within its app
	validate() error
}

// entity constrains P to be a pointer to T implementing versioned.
type entity[T any] interface {
	*T
	versioned
}

// load reads one entity of an app by name, or ErrNotFound.
func load[T any, P entity[T]](tx *gorm.DB, app, name string) (P, error) {
	e := P(new(T))
	if err := tx.Where("app = ? AND "+e.nameColumn()+" = ?", app, name).Take(e).Error; err != nil {
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return nil, fmt.Errorf("%w: %s/%s", ErrNotFound, app, name)
		}
		return nil, err
	}
	return e, nil
}

// list reads one page of the entities of app (every app when app is "")
// ordered by app and name; an entry's cursor is "app/name".
func list[T any, P entity[T]](db *gorm.DB, app string, pg Page) ([]T, string, error) {
	col := P(new(T)).nameColumn()
	q := db.Order("app, " + col)
	if app != "" {
		q = q.Where("app = ?", app)
	}
	if pg.After != "" {
		a, n, _ := strings.Cut(pg.After, "/") // app names hold no slash
		q = q.Where("(app > ? OR (app = ? AND "+col+" > ?))", a, a, n)
	}
	var out []T
	if err := pg.limit(q).Find(&out).Error; err != nil {
		return nil, "", unavailable(err)
	}
	out, next := Cut(out, pg, func(e *T) string {
		_, key, _ := strings.Cut(P(e).Target(), "/") // "kind/app/name"
		return key
	})
	return out, next, nil
}

// entityOp names one change of a versioned entity: who, which entity
// (outbox kind, app and name), what and why, and the version the caller
// expects (nil: any).
type entityOp struct {
	Actor   Actor
	Kind    string // outbox kind
	App     string
	Name    string
	Action  audit.Action
	Reason  string
	Version *int64
	// Pending is the change as a request would store it (see change).
	Pending *Pending
}

// change returns the audited change of op whose write is apply.
func (op entityOp) change(apply func(tx *gorm.DB) (string, any, any, error)) change {
	return change{
		Actor: op.Actor, Action: op.Action, Reason: op.Reason,
		Publish: entityKey{op.Kind, op.App, op.Name}, Apply: apply, Pending: op.Pending,
	}
}

// held sets what a change request would store of op's change.
func (op entityOp) held(p Pending) entityOp {
	p.App, p.Name = op.App, op.Name
	op.Pending = &p
	return op
}

// stamp sets the bookkeeping of an entity written by op at version v.
func (op entityOp) stamp(rec *Record, v int64, now time.Time) {
	rec.Version, rec.Reason, rec.UpdatedBy, rec.UpdatedAt = v, strings.TrimSpace(op.Reason), op.Actor.Name, now
}

// create validates and inserts a new entity as version 1.
func create[T any, P entity[T]](ctx context.Context, s *Service, op entityOp, build func() (P, error)) (P, Receipt, error) {
	var out P
	rc, err := s.commit(ctx, op.change(func(tx *gorm.DB) (_ string, _, _ any, err error) {
		if out, err = build(); err != nil {
			return "", nil, nil, err
		}
		if err := out.validate(); err != nil {
			return "", nil, nil, err
		}
		now := s.now()
		op.stamp(out.base(), 1, now)
		out.base().CreatedAt = now
		if err := tx.Create(out).Error; err != nil {
			return "", nil, nil, err
		}
		return out.Target(), nil, out.describe(), nil
	}))
	if errors.Is(err, ErrAlreadyExists) {
		err = &ExistsError{Field: P(new(T)).nameColumn(), Name: op.App + "/" + op.Name}
	}
	if err != nil {
		return nil, rc, err
	}
	return out, rc, nil
}

// update loads an entity, lets mutate change a copy, validates it and
// writes it back guarded by its version: a stale expected version or a
// concurrent writer gives ErrConflict.
func update[T any, P entity[T]](ctx context.Context, s *Service, op entityOp, mutate func(P) error) (P, Receipt, error) {
	c, out := updateChange[T, P](s, op, mutate)
	return commitBuilt(ctx, s, c, out, nil)
}

// updateChange is the change behind update; *out is the written entity
// once the change has been applied.
func updateChange[T any, P entity[T]](s *Service, op entityOp, mutate func(P) error) (change, *P) {
	out := new(P)
	return op.change(func(tx *gorm.DB) (string, any, any, error) {
		cur, err := load[T, P](tx, op.App, op.Name)
		if err != nil {
			return "", nil, nil, err
		}
		next := P(new(T))
		*next = *cur
		if err := mutate(next); err != nil {
			return "", nil, nil, err
		}
		if err := next.validate(); err != nil {
			return "", nil, nil, err
		}
		old := cur.base()
		if err := CheckVersion(op.Version, old.Version); err != nil {
			return "", nil, nil, err
		}
		op.stamp(next.base(), old.Version+1, s.now())
		if err := UpdateVersioned(tx, P(new(T)), Versioned{ID: old.ID, Version: old.Version, What: cur.Target(), Sent: op.Version}, next); err != nil {
			return "", nil, nil, err
		}
		*out = next
		return next.Target(), cur.describe(), next.describe(), nil
	}), out
}

// remove deletes an entity guarded by its version.
func remove[T any, P entity[T]](ctx context.Context, s *Service, op entityOp) (Receipt, error) {
	return s.commit(ctx, op.change(func(tx *gorm.DB) (string, any, any, error) {
		cur, err := load[T, P](tx, op.App, op.Name)
		if err != nil {
			return "", nil, nil, err
		}
		old := cur.base()
		if err := CheckVersion(op.Version, old.Version); err != nil {
			return "", nil, nil, err
		}
		if err := DeleteVersioned(tx, P(new(T)), Versioned{ID: old.ID, Version: old.Version, What: cur.Target(), Sent: op.Version}); err != nil {
			return "", nil, nil, err
		}
		return cur.Target(), cur.describe(), nil, nil
	}))
}
