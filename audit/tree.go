package audit

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"sync"

	"golang.org/x/mod/sumdb/tlog"
	"gorm.io/gorm"
)

// The Merkle tree: beside the hash chain, every event is a leaf of an
// RFC 6962 tree (golang.org/x/mod/sumdb/tlog). Leaf n (0-based) is event
// n+1, and its record data is the event's hash (32 bytes). The tree's
// stored hashes live in audit_tree, indexed as tlog.StoredHashIndex, and
// are written by Append in the transaction of the event. A tree of size N
// has a root anyone holding the N events can recompute; signed checkpoints
// of it let a witness prove that a later log still contains it
// (consistency) and that an event is in it (inclusion).

// treeNode is one stored hash of the tree.
type treeNode struct {
	Idx  int64 `gorm:"primaryKey;autoIncrement:false"`
	Hash []byte
}

func (treeNode) TableName() string { return "audit_tree" }

// ErrTreeBehind means the tree lacks hashes the chain's events need: a
// database written before the tree existed (SyncTree fills it in).
var ErrTreeBehind = errors.New("audit: the Merkle tree is behind the chain")

// LeafData is the record data of event e in the tree: its hash's bytes.
func LeafData(e *Event) ([]byte, error) {
	b, err := hex.DecodeString(e.Hash)
	if err != nil || len(b) != 32 {
		return nil, fmt.Errorf("audit: event %d: hash %q is not 32 hex bytes", e.ID, e.Hash)
	}
	return b, nil
}

// hashReader reads stored tree hashes from db.
type hashReader struct {
	db *gorm.DB
}

// ReadHashes implements tlog.HashReader; a missing hash is ErrTreeBehind.
func (r hashReader) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	if len(indexes) == 0 {
		return nil, nil
	}
	var rows []treeNode
	if err := r.db.Where("idx IN ?", indexes).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("audit: read tree: %w", err)
	}
	byIdx := make(map[int64][]byte, len(rows))
	for _, row := range rows {
		byIdx[row.Idx] = row.Hash
	}
	out := make([]tlog.Hash, len(indexes))
	for i, idx := range indexes {
		h, ok := byIdx[idx]
		if !ok || len(h) != len(tlog.Hash{}) {
			return nil, fmt.Errorf("%w: stored hash %d is missing", ErrTreeBehind, idx)
		}
		copy(out[i][:], h)
	}
	return out, nil
}

// addLeaf stores the hashes leaf n = e.ID-1 adds to the tree.
func addLeaf(tx *gorm.DB, e *Event) error {
	data, err := LeafData(e)
	if err != nil {
		return err
	}
	n := e.ID - 1
	r := lastEdge.reader(tx, e.PrevHash, n)
	hashes, err := tlog.StoredHashes(n, data, r)
	if err != nil {
		return err
	}
	first := tlog.StoredHashIndex(0, n)
	rows := make([]treeNode, len(hashes))
	for i, h := range hashes {
		rows[i] = treeNode{Idx: first + int64(i), Hash: h[:]}
		r.known[first+int64(i)] = h
	}
	if err := tx.Create(&rows).Error; err != nil {
		return fmt.Errorf("audit: store tree hashes: %w", err)
	}
	lastEdge.keep(e.Hash, n+1, r.known)
	return nil
}

// rightEdge remembers the tree's right edge after this process's last
// append: the roots of the complete subtrees of its size, which are all the
// stored hashes the next leaf needs (tlog.StoredHashes). It saves the
// append a read of the tree. It is keyed by the hash of the last event,
// which fixes every event before it (the chain), so it cannot answer for
// another log: an append after another console's, or after a rolled-back
// one, finds another prev_hash and reads the database.
type rightEdge struct {
	mu     sync.Mutex
	head   string // hash of the event whose leaf was added last
	size   int64
	hashes map[int64]tlog.Hash
}

var lastEdge rightEdge

// reader is the hash reader of the append of leaf n after the event whose
// hash is prev: the remembered edge when it is that event's, else the
// database.
func (re *rightEdge) reader(tx *gorm.DB, prev string, n int64) *edgeReader {
	r := &edgeReader{db: hashReader{tx}, known: map[int64]tlog.Hash{}}
	re.mu.Lock()
	defer re.mu.Unlock()
	if re.head == prev && re.size == n {
		maps.Copy(r.known, re.hashes)
	}
	return r
}

// keep remembers the edge of the tree of size events whose last is head,
// from the hashes known while appending it.
func (re *rightEdge) keep(head string, size int64, known map[int64]tlog.Hash) {
	edge := map[int64]tlog.Hash{}
	for level := 0; size>>level > 0; level++ {
		if (size>>level)&1 == 1 {
			idx := tlog.StoredHashIndex(level, size>>level-1)
			if h, ok := known[idx]; ok {
				edge[idx] = h
			}
		}
	}
	re.mu.Lock()
	defer re.mu.Unlock()
	re.head, re.size, re.hashes = head, size, edge
}

// edgeReader answers from the known hashes and reads the rest from the
// database, remembering them.
type edgeReader struct {
	db    hashReader
	known map[int64]tlog.Hash
}

func (r *edgeReader) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	var missing []int64
	for _, idx := range indexes {
		if _, ok := r.known[idx]; !ok {
			missing = append(missing, idx)
		}
	}
	if len(missing) > 0 {
		read, err := r.db.ReadHashes(missing)
		if err != nil {
			return nil, err
		}
		for i, idx := range missing {
			r.known[idx] = read[i]
		}
	}
	out := make([]tlog.Hash, len(indexes))
	for i, idx := range indexes {
		out[i] = r.known[idx]
	}
	return out, nil
}

// SyncTree adds to the tree every event it lacks (a database whose events
// were written before the tree existed) and returns the tree's size. When
// the tree lacks events it takes the chain's lock, waiting for the
// audited transactions in flight; a tree in step with the chain takes no
// lock. The console runs it at start; Append runs it when it finds the
// tree behind.
func SyncTree(ctx context.Context, db *gorm.DB) (int64, error) {
	db = db.WithContext(ctx)
	// The head first: events and their tree hashes commit together, so a
	// tree read after the head is at least as big unless it lacks events.
	head, err := TreeSize(ctx, db)
	if err != nil {
		return 0, err
	}
	size, err := storedTreeSize(db)
	if err != nil || size >= head {
		return size, err
	}
	err = db.Transaction(func(tx *gorm.DB) (err error) {
		if err := Lock(tx); err != nil {
			return err
		}
		size, err = syncTree(tx)
		return err
	})
	return size, err
}

// syncTree is SyncTree inside tx, which holds the chain's lock.
func syncTree(tx *gorm.DB) (int64, error) {
	size, err := storedTreeSize(tx)
	if err != nil {
		return 0, err
	}
	for {
		var batch []Event
		if err := tx.Where("id > ?", size).Order("id").Limit(1000).Find(&batch).Error; err != nil {
			return 0, fmt.Errorf("audit: sync tree: %w", err)
		}
		for i := range batch {
			if batch[i].ID != size+1 {
				return 0, fmt.Errorf("audit: sync tree: event %d is missing", size+1)
			}
			if err := addLeaf(tx, &batch[i]); err != nil {
				return 0, err
			}
			size++
		}
		if len(batch) < 1000 {
			return size, nil
		}
	}
}

// storedTreeSize is the number of leaves whose hashes audit_tree holds,
// from its highest index.
func storedTreeSize(tx *gorm.DB) (int64, error) {
	var top struct{ Idx *int64 }
	if err := tx.Model(&treeNode{}).Select("MAX(idx) AS idx").Scan(&top).Error; err != nil {
		return 0, fmt.Errorf("audit: tree size: %w", err)
	}
	if top.Idx == nil {
		return 0, nil
	}
	// The highest stored index belongs to the last leaf written: the first
	// leaf whose stored hashes reach beyond it is the size.
	lo, hi := int64(0), *top.Idx+1 // StoredHashCount(hi) > top for hi = top+1
	for lo < hi {
		mid := (lo + hi) / 2
		if tlog.StoredHashCount(mid) > *top.Idx {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo, nil
}

// TreeSize is the number of events in the log, which is the tree's size.
func TreeSize(ctx context.Context, db *gorm.DB) (int64, error) {
	head, err := Head(ctx, db)
	if err != nil || head == nil {
		return 0, err
	}
	return head.ID, nil
}

// TreeHash is the root of the tree of the first size events.
func TreeHash(ctx context.Context, db *gorm.DB, size int64) (tlog.Hash, error) {
	return tlog.TreeHash(size, hashReader{db.WithContext(ctx)})
}

// ProveInclusion proves that event id is leaf id-1 of the tree of size
// events.
func ProveInclusion(ctx context.Context, db *gorm.DB, size, id int64) (tlog.RecordProof, error) {
	return tlog.ProveRecord(size, id-1, hashReader{db.WithContext(ctx)})
}

// ProveConsistency proves that the tree of size to contains the tree of
// size from as its prefix.
func ProveConsistency(ctx context.Context, db *gorm.DB, from, to int64) (tlog.TreeProof, error) {
	return tlog.ProveTree(to, from, hashReader{db.WithContext(ctx)})
}

// memTree is a tree kept in memory: the stored hashes, densely indexed.
// Verify and offline verifiers rebuild the tree from the events with it.
type memTree struct {
	hashes []tlog.Hash
	size   int64
}

func (m *memTree) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, idx := range indexes {
		if idx < 0 || idx >= int64(len(m.hashes)) {
			return nil, fmt.Errorf("audit: stored hash %d is beyond the tree", idx)
		}
		out[i] = m.hashes[idx]
	}
	return out, nil
}

// add appends a leaf with record data.
func (m *memTree) add(data []byte) error {
	hs, err := tlog.StoredHashes(m.size, data, m)
	if err != nil {
		return err
	}
	m.hashes = append(m.hashes, hs...)
	m.size++
	return nil
}

// errVerifyRead marks a verification that could not read the database.
var errVerifyRead = errors.New("audit: verify tree: read")

// verifyTree compares the stored tree with m, rebuilt from the chain: every
// stored hash must match, and the stored tree must be exactly as big.
func verifyTree(ctx context.Context, db *gorm.DB, m *memTree) error {
	const page = 1000
	next := int64(0)
	for {
		var rows []treeNode
		if err := db.WithContext(ctx).Where("idx >= ?", next).Order("idx").Limit(page).Find(&rows).Error; err != nil {
			return fmt.Errorf("%w: %w", errVerifyRead, err)
		}
		for _, row := range rows {
			if row.Idx != next {
				return fmt.Errorf("stored hash %d is missing", next)
			}
			if row.Idx >= int64(len(m.hashes)) {
				return fmt.Errorf("the tree holds hashes beyond its %d events (stored hash %d)", m.size, row.Idx)
			}
			if string(row.Hash) != string(m.hashes[row.Idx][:]) {
				level, n := tlog.SplitStoredHashIndex(row.Idx)
				return fmt.Errorf("stored hash %d (level %d, node %d) does not match the events", row.Idx, level, n)
			}
			next++
		}
		if len(rows) < page {
			break
		}
	}
	if next != int64(len(m.hashes)) {
		return fmt.Errorf("the tree holds %d of the %d hashes of its %d events", next, len(m.hashes), m.size)
	}
	return nil
}
