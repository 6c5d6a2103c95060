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
	// Pending is the change as a change request would store it, should
	// the approval policy hold it (nil: it cannot be held as a request).
	Pending *Pending
}

// commit runs a change in its own transaction and waits for its
// publication.
func (s *Service) commit(ctx context.Context, c change) (Receipt, error) {
	var ob *outboxRow
	err := s.tx(ctx, func(tx *gorm.DB) (err error) {
		ob, err = s.record(tx, c)
		return err
	})
	var held *ApprovalRequired
	if errors.As(err, &held) && c.Pending != nil {
		// Nothing was applied; the change waits as a request.
		if herr := s.hold(ctx, c, held); herr != nil {
			return Receipt{}, herr
		}
	}
	if err != nil {
		return Receipt{}, err
	}
	return s.await(ctx, ob), nil
}

// record applies a change inside tx: it authorizes and validates it, runs
// Apply, appends the audit event, tells the automation of a person's
// switch change (OnPersonChange) and adds the outbox row. It returns the outbox row (nil when the change
// publishes nothing).
func (s *Service) record(tx *gorm.DB, c change) (*outboxRow, error) {
	authorize := c.Authorize
	if authorize == nil {
		authorize = func(a Actor) error { return a.mayWrite(c.Publish.app) }
	}
	if err := authorize(c.Actor); err != nil {
		return nil, err
	}
	// Every bad field is reported at once: the reason's, those found
	// decoding the request (InputErrors) and Apply's own; whatever Apply
	// wrote is rolled back with the transaction.
	v := InputErrors(tx.Statement.Context)
	v.AddErr("", validateReason(c.Reason))
	// The audit chain's lock comes before any row lock of the change (see
	// audit.Lock).
	if err := audit.Lock(tx); err != nil {
		return nil, err
	}
	target, before, after, err := c.Apply(tx)
	var ve *ValidationError
	switch {
	case err != nil && errors.As(err, &ve):
		v.AddErr("", err)
	case err != nil && len(v) == 0:
		return nil, err
	}
	if err := v.Err(); err != nil {
		return nil, err
	}
	cause, err := s.gate(tx, c, before, after)
	if err != nil {
		return nil, err
	}
	if cause != "" {
		c.Actor.Cause = cause + prefixed(" ", c.Actor.Cause)
	}
	ev := c.Actor.event(c.Action, target, c.Reason)
	ev.At, ev.Before, ev.After = s.now(), jsonString(before), jsonString(after)
	appendEvent := audit.Append
	if s.chainOnly {
		appendEvent = audit.AppendChain
	}
	if err := appendEvent(tx, ev); err != nil {
		return nil, err
	}
	if err := s.tellAutomation(tx, c, changesBehaviour(before, after)); err != nil {
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

// CheckVersion compares the caller's expected version with the stored one.
func CheckVersion(expected *int64, current int64) error {
	if expected != nil && *expected != current {
		return &VersionError{What: "version", Expected: *expected, Current: current}
	}
	return nil
}

// Audited is an audited change of an entity etcd does not carry — a
// rollout plan, a trigger rule, a drill, a channel — made by a person
// through the API or by a job. Apply writes it inside the transaction and
// returns the audit target and the entity before and after.
type Audited struct {
	Actor  Actor
	Action audit.Action
	Reason string
	// App is the app the entity belongs to: the actor must be allowed to
	// change it. "" is a global entity, which only admins change.
	App   string
	Apply func(tx *gorm.DB) (target string, before, after any, err error)
	// Pending is the change as a change request would store it, for the
	// changes the approval policy may hold (creating or changing an
	// auto-trigger or a drill): see HoldAs.
	Pending *Pending
}

func (a Audited) change() change {
	c := change{Actor: a.Actor, Action: a.Action, Reason: a.Reason, Apply: a.Apply, Pending: a.Pending}
	if a.App == "" {
		c.Authorize = func(x Actor) error { return x.mayAdmin("change global settings") }
	} else {
		c.Authorize = func(x Actor) error { return x.mayWrite(a.App) }
	}
	return c
}

// Commit runs an audited change in its own transaction.
func (s *Service) Commit(ctx context.Context, a Audited) error {
	_, err := s.commit(ctx, a.change())
	return err
}

// PersonChange tells automation that a person changed a switch, and why.
type PersonChange struct {
	App, Name string
	Actor     Actor
	Action    audit.Action
	Reason    string
	At        time.Time
	// Behaviour says the change altered what the switch does: its state,
	// rollout, level, fallback or staleness, or it was created or
	// deleted. A renewal and a metadata-only edit (owner, description,
	// runbook, expiry policy) do not, and pause no automation.
	Behaviour bool
}

// changesBehaviour reports whether a switch change from before to after
// (SwitchViews, nil when absent) alters what the SDKs do.
func changesBehaviour(before, after any) bool {
	b, okB := before.(SwitchView)
	a, okA := after.(SwitchView)
	if !okB || !okA {
		return true
	}
	return b.Level != a.Level || b.State != a.State || !b.Rollout.Equal(a.Rollout) ||
		string(b.Fallback) != string(a.Fallback) || b.MaxStaleness != a.MaxStaleness || b.WarmUp != a.WarmUp
}

// OnPersonChange registers fn to run inside the transaction of every change
// a person (a user or an API token) makes to a switch, so the automation
// acting on that switch — its triggers, its staged rollout — pauses
// atomically with the change: people win. fn may record audited changes of
// its own through j (Commit). Register before serving; fn's error aborts
// the person's change.
func (s *Service) OnPersonChange(fn func(j *JobTx, c PersonChange) error) {
	s.personChanged = append(s.personChanged, fn)
}

// tellAutomation runs the OnPersonChange hooks for a change inside tx.
func (s *Service) tellAutomation(tx *gorm.DB, c change, behaviour bool) error {
	if c.Publish.kind != outboxSwitch || !c.Actor.Person() || len(s.personChanged) == 0 {
		return nil
	}
	j := &JobTx{s: s, tx: tx}
	pc := PersonChange{App: c.Publish.app, Name: c.Publish.name, Actor: c.Actor, Action: c.Action, Reason: strings.TrimSpace(c.Reason), At: s.now(), Behaviour: behaviour}
	for _, fn := range s.personChanged {
		if err := fn(j, pc); err != nil {
			return err
		}
	}
	if len(j.obs) > 0 {
		return errors.New("server: a person-change hook changed a switch; hooks may only pause automation")
	}
	return nil
}
