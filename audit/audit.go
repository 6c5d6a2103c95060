// Package audit is Switchyard's append-only, hash-chained audit log.
//
// Every change to a switch, limit rule or token appends one Event in the
// same database transaction as the change itself. Each event carries the
// hash of the one before it, so editing or deleting any row breaks the chain
// and Verify names the first event that no longer matches. The database
// refuses UPDATE, DELETE (and on Postgres TRUNCATE) on the table with
// triggers as a second line of defence.
//
// Beside the chain, every event is a leaf of an RFC 6962 Merkle tree
// (tree.go) appended in the same transaction; signed checkpoints of the
// tree (checkpoint.go) and the proofs between them let a witness outside
// the console (Witness, package witness) detect a log rewritten, truncated
// or forked by someone who can write the database. See docs/audit.md.
//
// The package knows nothing about HTTP or etcd; it needs a *gorm.DB.
package audit

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/tlog"
	"gorm.io/gorm"
)

// Actor kinds: people (users and their API tokens), the console's own
// bookkeeping (system: bootstrap, reconciler), and the leader jobs that act
// on switches, each as a kind of its own.
const (
	ActorUser    = "user"
	ActorToken   = "token"
	ActorSystem  = "system"
	ActorTrigger = "trigger"
	ActorDrill   = "drill"
	ActorExpiry  = "expiry"
	ActorRollout = "rollout"
)

// ActorKinds lists every actor kind, people first.
var ActorKinds = []string{ActorUser, ActorToken, ActorSystem, ActorTrigger, ActorDrill, ActorExpiry, ActorRollout}

// IsPerson reports whether kind is a person acting (a user, or a token
// used by a person or their automation) rather than the console itself.
// People win: their changes pause the automation acting on a switch.
func IsPerson(kind string) bool { return kind == ActorUser || kind == ActorToken }

// GenesisHash is the prev_hash of the first event.
const GenesisHash = "0000000000000000000000000000000000000000000000000000000000000000"

// Event is one audited change.
type Event struct {
	ID        int64     `gorm:"primaryKey;autoIncrement:false" json:"id"`
	At        time.Time `json:"at"`
	Actor     string    `json:"actor"`
	ActorKind string    `json:"actor_kind"`
	Action    Action    `json:"action"`
	Target    string    `json:"target"`
	Before    string    `json:"before,omitempty"` // JSON of the entity before, "" if none
	After     string    `json:"after,omitempty"`  // JSON of the entity after, "" if none
	Reason    string    `json:"reason"`
	// Cause names what made a job act: the rule or run behind the change
	// ("trigger/checkout/cpu-high", "drill/checkout/recommend#17").
	Cause      string `json:"cause,omitempty"`
	RequestID  string `json:"request_id,omitempty"`
	RemoteAddr string `json:"remote_addr,omitempty"`
	PrevHash   string `json:"prev_hash"`
	Hash       string `json:"hash"`
}

// TableName pins the table name.
func (Event) TableName() string { return "audit_events" }

// computeHash is sha256 over the previous hash and a canonical encoding of
// every field but the hash itself. The encoding is a JSON array, so field
// boundaries are unambiguous. Cause joins the array only when set, so the
// events written before it existed keep their hashes.
func (e *Event) computeHash() string {
	fields := []any{
		e.ID, e.At.UTC().Format(time.RFC3339Nano), e.Actor, e.ActorKind, e.Action, e.Target,
		e.Before, e.After, e.Reason, e.RequestID, e.RemoteAddr, e.PrevHash,
	}
	if e.Cause != "" {
		fields = append(fields, e.Cause)
	}
	b, _ := json.Marshal(fields) // cannot fail for these types
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// ContentHash is the hash e's content gives (what Hash must be). Tools
// that check an exported log, and tamper tests that play a database writer
// recomputing the chain, use it.
func (e *Event) ContentHash() string { return e.computeHash() }

// Append adds e to the chain and to the Merkle tree inside tx, which must
// be the transaction of the change being audited. It assigns ID, At (if
// zero), PrevHash and Hash. Appends are serialized: on Postgres by a
// transaction-scoped advisory lock, on SQLite by its single writer.
func Append(tx *gorm.DB, e *Event) error {
	if err := AppendChain(tx, e); err != nil {
		return err
	}
	err := addLeaf(tx, e)
	if errors.Is(err, ErrTreeBehind) {
		// Events written without the tree (before it existed): add them
		// all, e included.
		_, err = syncTree(tx)
	}
	return err
}

// AppendChain is Append without the tree: the event joins the hash chain
// only. It is the baseline that measures the tree's cost; the next Append
// (or SyncTree) adds the events it skipped to the tree.
func AppendChain(tx *gorm.DB, e *Event) error {
	if e.Actor == "" || e.Action == "" || e.Target == "" {
		return errors.New("audit: actor, action and target are required")
	}
	if !slices.Contains(ActorKinds, e.ActorKind) {
		return fmt.Errorf("audit: unknown actor kind %q", e.ActorKind)
	}
	if err := Lock(tx); err != nil {
		return err
	}
	var last Event
	err := tx.Order("id DESC").Limit(1).Find(&last).Error
	if err != nil {
		return fmt.Errorf("audit: read chain head: %w", err)
	}
	e.ID = last.ID + 1
	e.PrevHash = GenesisHash
	if last.ID != 0 {
		e.PrevHash = last.Hash
	}
	if e.At.IsZero() {
		e.At = time.Now()
	}
	// Both databases keep microseconds; hash exactly what is stored.
	e.At = e.At.UTC().Truncate(time.Microsecond)
	e.Hash = e.computeHash()
	if err := tx.Create(e).Error; err != nil {
		return fmt.Errorf("audit: append: %w", err)
	}
	return nil
}

// Lock takes the chain's lock inside tx until it ends (Append takes it
// too; taking it twice is free). A transaction that appends and also locks
// rows must take it before its first row lock: otherwise one that appends
// and then updates a row, and one that updates that row and then appends,
// wait for each other for ever (Postgres ends one with "deadlock
// detected"). On SQLite, whose writers are serialized, it does nothing.
func Lock(tx *gorm.DB) error {
	if tx.Dialector.Name() != "postgres" {
		return nil
	}
	if err := tx.Exec("SELECT pg_advisory_xact_lock(?)", chainLockKey).Error; err != nil {
		return fmt.Errorf("audit: lock chain: %w", err)
	}
	return nil
}

// chainLockKey is the advisory lock id that serializes appends on Postgres.
const chainLockKey = 0x5377_6974_6368 // "Switch"

// Mismatch describes the first event that breaks the chain.
type Mismatch struct {
	ID     int64  `json:"id"`
	Reason string `json:"reason"`
}

func (m *Mismatch) Error() string {
	return fmt.Sprintf("audit: chain broken at event %d: %s", m.ID, m.Reason)
}

// Result summarizes a verification.
type Result struct {
	Events   int64     `json:"events"`
	HeadHash string    `json:"head_hash"`
	Mismatch *Mismatch `json:"mismatch,omitempty"`
	// TreeRoot is the Merkle tree's root over the events (base64).
	TreeRoot string `json:"tree_root,omitempty"`
	// Checkpoints counts the stored checkpoints whose roots match the tree.
	Checkpoints int `json:"checkpoints"`
	// TreeMismatch says how the stored tree or a stored checkpoint
	// disagrees with the chain.
	TreeMismatch string `json:"tree_mismatch,omitempty"`
}

// OK reports whether the chain, the tree and the checkpoints verified.
func (r Result) OK() bool { return r.Mismatch == nil && r.TreeMismatch == "" }

// Err is nil when r is OK, else the mismatch as an error.
func (r Result) Err() error {
	switch {
	case r.Mismatch != nil:
		return r.Mismatch
	case r.TreeMismatch != "":
		return fmt.Errorf("audit: tree: %s", r.TreeMismatch)
	}
	return nil
}

// Verify walks the chain from the first event and reports the first event
// whose id, prev_hash or hash does not match. When the chain holds, it
// rebuilds the Merkle tree from the events and compares it with the stored
// tree, and the root of every stored checkpoint with the tree's root at its
// size. An error is returned only when the database cannot be read.
func Verify(ctx context.Context, db *gorm.DB) (Result, error) {
	c := newChainCheck()
	const page = 1000
	for {
		var batch []Event
		if err := db.WithContext(ctx).Where("id > ?", c.prevID).Order("id").Limit(page).Find(&batch).Error; err != nil {
			return c.res, fmt.Errorf("audit: verify: %w", err)
		}
		for i := range batch {
			if ok, err := c.add(&batch[i]); !ok || err != nil {
				return c.res, err
			}
		}
		if len(batch) < page {
			break
		}
	}
	if err := c.finish(); err != nil {
		return c.res, err
	}
	if err := verifyTree(ctx, db, &c.tree); err != nil {
		if !errors.Is(err, errVerifyRead) {
			c.res.TreeMismatch = err.Error()
			return c.res, nil
		}
		return c.res, err
	}
	cps, err := Checkpoints(ctx, db)
	if err != nil {
		return c.res, err
	}
	for _, cp := range cps {
		if ok, err := c.checkpoint(cp.Size, cp.Root); !ok || err != nil {
			return c.res, err
		}
	}
	return c.res, nil
}

// chainCheck verifies events one at a time in chain order and rebuilds
// the Merkle tree from them: Verify reads them from the database,
// VerifyBundle from an export.
type chainCheck struct {
	res    Result
	tree   memTree
	prevID int64
}

func newChainCheck() *chainCheck { return &chainCheck{res: Result{HeadHash: GenesisHash}} }

// add checks that e continues the chain; false (with res.Mismatch set)
// when it does not.
func (c *chainCheck) add(e *Event) (bool, error) {
	switch {
	case e.ID != c.prevID+1:
		c.res.Mismatch = &Mismatch{ID: e.ID, Reason: fmt.Sprintf("expected id %d: an event is missing", c.prevID+1)}
	case e.PrevHash != c.res.HeadHash:
		c.res.Mismatch = &Mismatch{ID: e.ID, Reason: "prev_hash does not match the previous event"}
	case e.computeHash() != e.Hash:
		c.res.Mismatch = &Mismatch{ID: e.ID, Reason: "content does not match its hash"}
	}
	if c.res.Mismatch != nil {
		return false, nil
	}
	data, err := LeafData(e)
	if err == nil {
		err = c.tree.add(data)
	}
	if err != nil {
		return false, err
	}
	c.res.Events++
	c.res.HeadHash = e.Hash
	c.prevID = e.ID
	return true, nil
}

// finish records the rebuilt tree's root.
func (c *chainCheck) finish() error {
	root, err := tlog.TreeHash(c.tree.size, &c.tree)
	if err != nil {
		return err
	}
	c.res.TreeRoot = base64.StdEncoding.EncodeToString(root[:])
	return nil
}

// checkpoint compares a checkpoint's root (base64) with the rebuilt tree's
// at its size; false (with res.TreeMismatch set) when they differ.
func (c *chainCheck) checkpoint(size int64, root string) (bool, error) {
	if size > c.tree.size {
		c.res.TreeMismatch = fmt.Sprintf("checkpoint of size %d is beyond the log's %d events", size, c.tree.size)
		return false, nil
	}
	h, err := tlog.TreeHash(size, &c.tree)
	if err != nil {
		return false, err
	}
	if got := base64.StdEncoding.EncodeToString(h[:]); got != root {
		c.res.TreeMismatch = fmt.Sprintf("checkpoint of size %d has root %s, the events give %s", size, root, got)
		return false, nil
	}
	c.res.Checkpoints++
	return true, nil
}

// Filter selects events for List and Export. Zero fields match everything.
type Filter struct {
	Target string
	// TargetPrefix matches targets that start with it ("switch/checkout/").
	TargetPrefix string
	Actor        string
	// ActorKind matches one kind of actor (ActorTrigger, …).
	ActorKind string
	Action    Action
	Since     time.Time
	Until     time.Time
	// BeforeID pages backwards: only events with a smaller id (0 = newest).
	BeforeID int64
	// Limit caps the page; 0 means 100, at most 1000.
	Limit int
}

func (f Filter) apply(q *gorm.DB) *gorm.DB {
	if f.Target != "" {
		q = q.Where("target = ?", f.Target)
	}
	if f.TargetPrefix != "" {
		q = q.Where("target LIKE ? ESCAPE '\\'", likePrefix(f.TargetPrefix))
	}
	if f.Actor != "" {
		q = q.Where("actor = ?", f.Actor)
	}
	if f.ActorKind != "" {
		q = q.Where("actor_kind = ?", f.ActorKind)
	}
	if f.Action != "" {
		q = q.Where("action = ?", f.Action)
	}
	if !f.Since.IsZero() {
		q = q.Where("at >= ?", f.Since.UTC())
	}
	if !f.Until.IsZero() {
		q = q.Where("at < ?", f.Until.UTC())
	}
	return q
}

// List returns matching events newest first, and the BeforeID of the next
// page (0 when there is none).
func List(ctx context.Context, db *gorm.DB, f Filter) ([]Event, int64, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	limit = min(limit, 1000)
	q := f.apply(db.WithContext(ctx).Model(&Event{}))
	if f.BeforeID > 0 {
		q = q.Where("id < ?", f.BeforeID)
	}
	var events []Event
	if err := q.Order("id DESC").Limit(limit + 1).Find(&events).Error; err != nil {
		return nil, 0, fmt.Errorf("audit: list: %w", err)
	}
	var next int64
	if len(events) > limit {
		events = events[:limit]
		next = events[limit-1].ID
	}
	return events, next, nil
}

// Each calls fn for every matching event in chain order, reading in pages.
func Each(ctx context.Context, db *gorm.DB, f Filter, fn func(*Event) error) error {
	var after int64
	for {
		var batch []Event
		q := f.apply(db.WithContext(ctx).Model(&Event{})).Where("id > ?", after)
		if err := q.Order("id").Limit(1000).Find(&batch).Error; err != nil {
			return fmt.Errorf("audit: read: %w", err)
		}
		for i := range batch {
			if err := fn(&batch[i]); err != nil {
				return err
			}
		}
		if len(batch) < 1000 {
			return nil
		}
		after = batch[len(batch)-1].ID
	}
}

// Head returns the newest event, or nil when the log is empty.
func Head(ctx context.Context, db *gorm.DB) (*Event, error) {
	var e Event
	if err := db.WithContext(ctx).Order("id DESC").Limit(1).Find(&e).Error; err != nil {
		return nil, fmt.Errorf("audit: head: %w", err)
	}
	if e.ID == 0 {
		return nil, nil
	}
	return &e, nil
}

// likePrefix is a LIKE pattern matching strings that start with p, its
// wildcards escaped.
func likePrefix(p string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return r.Replace(p) + "%"
}
