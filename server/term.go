package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/switchyard-io/switchyard/audit"
)

// ErrNotLeader means a fenced write found a newer leader: the job's term
// is over and it must stop acting.
var ErrNotLeader = errors.New("server: lost scheduler leadership")

// Term is one leadership term of the scheduler election. Rev, the
// election key's create revision, grows with every new leader, so it
// fences writes twice: etcd transactions compare the election key (Fence),
// and database transactions of leader jobs compare the term recorded in
// the database (InTerm). A deposed leader can do neither.
type Term struct {
	Rev    int64
	Holder string
	Fence  Fence
}

// termRow is the database's record of the current term.
type termRow struct {
	ID     int64 `gorm:"primaryKey"`
	Term   int64
	Holder string
	Since  *time.Time
}

func (termRow) TableName() string { return "leader_term" }

// ClaimTerm records t as the database's current term when it is newer than
// the recorded one. It answers ErrNotLeader when a newer term is already
// recorded (this console's election was overtaken). A new leader claims
// its term before its jobs run, so a deposed leader's job transactions
// fail from then on; a transaction the old leader committed before the
// claim is seen by the new leader's jobs.
func (s *Service) ClaimTerm(ctx context.Context, t Term) error {
	return s.tx(ctx, func(tx *gorm.DB) error {
		now := s.now()
		res := tx.Model(&termRow{}).Where("id = 1 AND term <= ?", t.Rev).
			Updates(map[string]any{"term": t.Rev, "holder": t.Holder, "since": now})
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			var cur termRow
			if err := tx.Take(&cur, 1).Error; err != nil {
				return err
			}
			return fmt.Errorf("%w: term %d of %s is newer than %d", ErrNotLeader, cur.Term, cur.Holder, t.Rev)
		}
		return nil
	})
}

// ReplaceTerm records t in place of the term stale, only if stale is still
// the recorded one (compare and set). The scheduler uses it when the
// recorded term is newer than its own but etcd knows no election key of
// that revision: etcd was restored or replaced and its revisions started
// again, so no leader would ever be newer.
func (s *Service) ReplaceTerm(ctx context.Context, stale int64, t Term) error {
	return s.tx(ctx, func(tx *gorm.DB) error {
		res := tx.Model(&termRow{}).Where("id = 1 AND term = ?", stale).
			Updates(map[string]any{"term": t.Rev, "holder": t.Holder, "since": s.now()})
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return fmt.Errorf("%w: the recorded term changed from %d", ErrNotLeader, stale)
		}
		return nil
	})
}

// CurrentTerm returns the term recorded in the database and its holder.
func (s *Service) CurrentTerm(ctx context.Context) (rev int64, holder string, err error) {
	var cur termRow
	if err := s.db.WithContext(ctx).Take(&cur, 1).Error; err != nil {
		return 0, "", mapDBError(err)
	}
	return cur.Term, cur.Holder, nil
}

// InTerm runs fn in one transaction that commits only while t is the
// database's current term, and returns the receipts of the changes fn made
// once they are published. A leader job does all of one step through it:
// it reads and writes its own state (JobTx.DB, LoadState, SaveState) and
// changes switches (JobTx.TurnOn, …) through the audited change path, and
// all of it commits together or not at all — so a step is never applied
// twice, whichever leader runs it. A deposed leader's transaction fails
// with ErrNotLeader.
func (s *Service) InTerm(ctx context.Context, t Term, fn func(j *JobTx) error) ([]Receipt, error) {
	return s.inTerm(ctx, t, fn, true)
}

// InTermLazyAudit is InTerm for a step that usually writes only its own
// state (a trigger rule's evaluation, a plan waiting for its fleet): fn
// runs without the audit chain's lock, so such saves never queue behind
// people's changes. When fn records an audited change, its transaction is
// rolled back and fn runs again with the lock taken first (audit.Lock
// must come before any row lock). fn must read everything it decides on
// through j, so that running it twice is running it once.
func (s *Service) InTermLazyAudit(ctx context.Context, t Term, fn func(j *JobTx) error) ([]Receipt, error) {
	rc, err := s.InTermStateOnly(ctx, t, fn)
	if errors.Is(err, ErrNeedsAudit) {
		return s.inTerm(ctx, t, fn, true)
	}
	return rc, err
}

// InTermStateOnly is InTerm for a step that must record no audited
// change: it runs without the audit chain's lock, and fails with
// ErrNeedsAudit (writing nothing) when fn reaches one.
func (s *Service) InTermStateOnly(ctx context.Context, t Term, fn func(j *JobTx) error) ([]Receipt, error) {
	return s.inTerm(ctx, t, fn, false)
}

// stateOnly marks a job transaction that appends nothing to the audit
// log: on Postgres it commits without waiting for its WAL flush
// (synchronous_commit off, for this transaction only), so a job's
// bookkeeping does not compete with people's changes for the disk. A
// database crash may lose the last fraction of a second of it — a rule's
// last evaluation, a plan's last note — which the next step writes again;
// never an audited change, whose transaction waits for its flush.
func stateOnly(tx *gorm.DB) error {
	if tx.Dialector.Name() != "postgres" {
		return nil
	}
	return tx.Exec("SET LOCAL synchronous_commit = off").Error
}

// ErrNeedsAudit stops a state-only job transaction (InTermStateOnly,
// the first run of InTermLazyAudit) at its first audited change.
var ErrNeedsAudit = errors.New("server: the step records an audited change; run it again under the audit lock")

func (s *Service) inTerm(ctx context.Context, t Term, fn func(j *JobTx) error, lock bool) ([]Receipt, error) {
	var obs []*outboxRow
	err := s.tx(ctx, func(tx *gorm.DB) error {
		// A step may write its own rows before an audited change: the
		// audit chain's lock comes first (see audit.Lock).
		if lock {
			if err := audit.Lock(tx); err != nil {
				return err
			}
		} else if err := stateOnly(tx); err != nil {
			return err
		}
		j := &JobTx{s: s, tx: tx, term: t, unlocked: !lock}
		if err := fn(j); err != nil {
			return err
		}
		// The term is checked last, under a share lock on its row held
		// only for the commit: a claim by a new leader either commits
		// first (and this fails) or waits for this commit (and its jobs
		// see it). Job transactions share the lock, so they never queue
		// behind one another's commits — the publisher's, which a
		// person's change waits for, least of all. (SQLite runs one
		// transaction at a time and needs no lock.)
		var cur []termRow
		err := tx.Clauses(clause.Locking{Strength: clause.LockingStrengthShare}).Where("id = 1 AND term = ?", t.Rev).Find(&cur).Error
		if err != nil {
			return err
		}
		if len(cur) == 0 {
			return fmt.Errorf("%w: term %d is over", ErrNotLeader, t.Rev)
		}
		obs = j.obs
		return nil
	})
	if err != nil {
		return nil, err
	}
	receipts := make([]Receipt, len(obs))
	for i, ob := range obs {
		receipts[i] = s.await(ctx, ob)
	}
	return receipts, nil
}

// JobTx is one fenced transaction of a leader job (see InTerm).
type JobTx struct {
	s    *Service
	tx   *gorm.DB
	term Term
	obs  []*outboxRow
	// unlocked: the transaction runs without the audit chain's lock and
	// may record no audited change (InTermLazyAudit).
	unlocked bool
}

// DB is the transaction, for the job's own tables.
func (j *JobTx) DB() *gorm.DB { return j.tx }

// Now is the service's clock.
func (j *JobTx) Now() time.Time { return j.s.now() }

// jobState is the row of a job without a table of its own.
type jobState struct {
	Name      string `gorm:"primaryKey"`
	State     string
	Term      int64
	UpdatedAt time.Time
}

func (jobState) TableName() string { return "leader_jobs" }

// LoadState decodes the stored state of job name into v; false when none
// is stored yet.
func (j *JobTx) LoadState(name string, v any) (bool, error) {
	var row jobState
	err := j.tx.Where("name = ?", name).Take(&row).Error
	switch {
	case errors.Is(err, gorm.ErrRecordNotFound):
		return false, nil
	case err != nil:
		return false, err
	}
	return true, json.Unmarshal([]byte(row.State), v)
}

// SaveState stores v as the state of job name.
func (j *JobTx) SaveState(name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	row := jobState{Name: name, State: string(b), Term: j.term.Rev, UpdatedAt: j.s.now()}
	return j.tx.Save(&row).Error
}

// Switch reads a switch inside the transaction.
func (j *JobTx) Switch(app, name string) (*Switch, error) {
	return load[Switch](j.tx, app, name)
}

// record applies a change inside the job's transaction.
func (j *JobTx) record(c change) error {
	if j.unlocked {
		return ErrNeedsAudit
	}
	ob, err := j.s.record(j.tx, c)
	if ob != nil {
		j.obs = append(j.obs, ob)
	}
	return err
}

// inJob records a built change and returns what it wrote.
func inJob[P any](j *JobTx, c change, out *P, err error) (P, error) {
	var zero P
	if err != nil {
		return zero, err
	}
	if err := j.record(c); err != nil {
		return zero, err
	}
	return *out, nil
}

// Commit records an audited change inside the job's transaction.
func (j *JobTx) Commit(a Audited) error { return j.record(a.change()) }

// TurnOn is Service.TurnOn inside the job's transaction.
func (j *JobTx) TurnOn(a Actor, app, name string, t Toggle) (*Switch, error) {
	c, out, err := j.s.turnOnChange(a, app, name, t)
	return inJob(j, c, out, err)
}

// TurnOff is Service.TurnOff inside the job's transaction.
func (j *JobTx) TurnOff(a Actor, app, name string, t Toggle) (*Switch, error) {
	c, out, err := j.s.turnOffChange(a, app, name, t)
	return inJob(j, c, out, err)
}

// Restore puts a switch back to a state recorded earlier (a staged
// rollout's revert): its state and rollout, and when it was on its
// on-since time and expiry, exactly as they were.
func (j *JobTx) Restore(a Actor, app, name string, to SwitchState, reason string, version *int64) (*Switch, error) {
	c, out, err := j.s.restoreChange(a, app, name, to, reason, version)
	return inJob(j, c, out, err)
}
