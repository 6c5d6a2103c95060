package audit_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
	"gorm.io/gorm"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/internal/servertest"
)

// eachDB runs fn on a fresh Postgres database and a fresh SQLite file.
func eachDB(t *testing.T, fn func(t *testing.T, db *gorm.DB)) {
	t.Run("postgres", func(t *testing.T) { fn(t, openPostgres(t)) })
	t.Run("sqlite", func(t *testing.T) { fn(t, servertest.OpenDB(t, "", t.TempDir())) })
}

// rfc6962Root is the Merkle tree hash of RFC 6962 §2.1, written from the
// RFC's definition, independent of tlog.
func rfc6962Root(leaves [][]byte) [32]byte {
	switch len(leaves) {
	case 0:
		return sha256.Sum256(nil)
	case 1:
		return sha256.Sum256(append([]byte{0}, leaves[0]...))
	}
	k := 1
	for k*2 < len(leaves) {
		k *= 2
	}
	l, r := rfc6962Root(leaves[:k]), rfc6962Root(leaves[k:])
	return sha256.Sum256(append(append([]byte{1}, l[:]...), r[:]...))
}

func events(t *testing.T, db *gorm.DB) []audit.Event {
	t.Helper()
	var out []audit.Event
	if err := audit.Each(context.Background(), db, audit.Filter{}, func(e *audit.Event) error {
		out = append(out, *e)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestTreeGolden: the stored tree's root equals tlog.TreeHash over the
// events' leaves and the RFC 6962 definition for every size 0–100; every
// event has a valid inclusion proof in the tree of every size that holds
// it; every smaller tree is consistent with the whole.
func TestTreeGolden(t *testing.T) {
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		appendN(t, db, 100)
		evs := events(t, db)
		leaves := make([][]byte, len(evs))
		var mem []tlog.Hash // tlog's stored hashes, computed in memory
		memReader := tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
			out := make([]tlog.Hash, len(idx))
			for i, x := range idx {
				out[i] = mem[x]
			}
			return out, nil
		})
		for i := range evs {
			b, err := hex.DecodeString(evs[i].Hash)
			if err != nil {
				t.Fatal(err)
			}
			leaves[i] = b
			hs, err := tlog.StoredHashes(int64(i), b, memReader)
			if err != nil {
				t.Fatal(err)
			}
			mem = append(mem, hs...)
		}
		roots := make([]tlog.Hash, 101)
		for size := int64(0); size <= 100; size++ {
			got, err := audit.TreeHash(ctx, db, size)
			if err != nil {
				t.Fatalf("size %d: %v", size, err)
			}
			want, err := tlog.TreeHash(size, memReader)
			if err != nil {
				t.Fatal(err)
			}
			if got != want || [32]byte(got) != rfc6962Root(leaves[:size]) {
				t.Fatalf("size %d: stored root %s, tlog.TreeHash %s, RFC 6962 %x", size, got, want, rfc6962Root(leaves[:size]))
			}
			roots[size] = got
		}
		for size := int64(1); size <= 100; size++ {
			for id := int64(1); id <= size; id++ {
				p, err := audit.ProveInclusion(ctx, db, size, id)
				if err != nil {
					t.Fatalf("inclusion of %d in %d: %v", id, size, err)
				}
				if err := tlog.CheckRecord(p, size, roots[size], id-1, tlog.RecordHash(leaves[id-1])); err != nil {
					t.Fatalf("inclusion of %d in %d: %v", id, size, err)
				}
			}
			p, err := audit.ProveConsistency(ctx, db, size, 100)
			if err != nil {
				t.Fatal(err)
			}
			if err := tlog.CheckTree(p, 100, roots[100], size, roots[size]); err != nil {
				t.Fatalf("consistency %d → 100: %v", size, err)
			}
		}
		res, err := audit.Verify(ctx, db)
		if err != nil || !res.OK() || res.Events != 100 || res.TreeRoot == "" {
			t.Fatalf("verify: %+v %v", res, err)
		}
	})
}

// TestTreeCatchesUp: events appended without the tree (a database older
// than the tree) join it at the next Append, and the whole verifies.
func TestTreeCatchesUp(t *testing.T) {
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		for i := range 5 {
			err := db.Transaction(func(tx *gorm.DB) error {
				return audit.AppendChain(tx, &audit.Event{Actor: "token:ops", ActorKind: audit.ActorToken,
					Action: "switch.on", Target: fmt.Sprintf("switch/checkout/old%d", i), Reason: "before the tree"})
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		if res, _ := audit.Verify(ctx, db); res.OK() || !strings.Contains(res.TreeMismatch, "0 of the") {
			t.Fatalf("a tree missing every event verified: %+v", res)
		}
		appendN(t, db, 3)
		if res, err := audit.Verify(ctx, db); err != nil || !res.OK() || res.Events != 8 {
			t.Fatalf("after catching up: %+v %v", res, err)
		}
		if n, err := audit.SyncTree(ctx, db); err != nil || n != 8 {
			t.Fatalf("sync of a complete tree: %d %v", n, err)
		}
	})
}

// TestTreeTamperIsNamed: a stored tree hash changed behind the console's
// back (the triggers bypassed) fails verification naming the hash.
func TestTreeTamperIsNamed(t *testing.T) {
	db := servertest.OpenDB(t, "", t.TempDir())
	appendN(t, db, 6)
	if err := db.Exec("UPDATE audit_tree SET hash = ? WHERE idx = 2", make([]byte, 32)).Error; err == nil || !strings.Contains(err.Error(), "append-only") {
		t.Fatalf("UPDATE of the tree not refused: %v", err)
	}
	for _, q := range []string{"DROP TRIGGER audit_tree_no_update", "UPDATE audit_tree SET hash = zeroblob(32) WHERE idx = 2"} {
		if err := db.Exec(q).Error; err != nil {
			t.Fatal(err)
		}
	}
	res, err := audit.Verify(context.Background(), db)
	if err != nil || res.OK() || !strings.Contains(res.TreeMismatch, "stored hash 2") {
		t.Fatalf("tampered tree: %+v %v", res, err)
	}
	if err := res.Err(); err == nil || !strings.Contains(err.Error(), "audit: tree: stored hash 2") {
		t.Fatalf("Err: %v", err)
	}
}

// TestBundleVerifiesOffline: a bundle export (events and signed
// checkpoints) verifies with the console's public key and nothing else; an
// edited event, a checkpoint under another key or a bundle without
// checkpoints fails. A checkpoint is signed only when the log grew.
func TestBundleVerifiesOffline(t *testing.T) {
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		key, err := audit.GenerateKeyFile(filepath.Join(t.TempDir(), "k"), audit.Origin("prod"))
		if err != nil {
			t.Fatal(err)
		}
		sign := func() *audit.StoredCheckpoint {
			var cp *audit.StoredCheckpoint
			if err := db.Transaction(func(tx *gorm.DB) (err error) {
				cp, err = audit.SignCheckpoint(tx, key, audit.Origin("prod"), time.Now())
				return err
			}); err != nil {
				t.Fatal(err)
			}
			return cp
		}
		appendN(t, db, 5)
		if cp := sign(); cp == nil || cp.Size != 5 || cp.Key != key.Verifier {
			t.Fatalf("checkpoint: %+v", cp)
		}
		if cp := sign(); cp != nil {
			t.Fatalf("a checkpoint of an unchanged log: %+v", cp)
		}
		appendN(t, db, 4)
		sign()
		if res, err := audit.Verify(ctx, db); err != nil || !res.OK() || res.Checkpoints != 2 {
			t.Fatalf("verify with checkpoints: %+v %v", res, err)
		}
		var buf bytes.Buffer
		if err := audit.Export(ctx, db, &buf, audit.FormatBundle, audit.Filter{}); err != nil {
			t.Fatal(err)
		}
		known, err := audit.Verifiers([]string{key.Verifier})
		if err != nil {
			t.Fatal(err)
		}
		res, err := audit.VerifyBundle(bytes.NewReader(buf.Bytes()), known)
		if err != nil || !res.OK() || res.Events != 9 || res.Checkpoints != 2 {
			t.Fatalf("bundle: %+v %v", res, err)
		}
		edited := strings.Replace(buf.String(), `"reason":"incident"`, `"reason":"routine"`, 1)
		if res, _ := audit.VerifyBundle(strings.NewReader(edited), known); res.Mismatch == nil || res.Mismatch.ID != 1 {
			t.Fatalf("edited bundle: %+v", res)
		}
		_, other, _ := note.GenerateKey(rand.Reader, audit.Origin("prod"))
		otherKnown, _ := audit.Verifiers([]string{other})
		if res, _ := audit.VerifyBundle(bytes.NewReader(buf.Bytes()), otherKnown); !strings.Contains(res.TreeMismatch, "checkpoint of size 5") {
			t.Fatalf("bundle under another key: %+v", res)
		}
		var events bytes.Buffer
		audit.Export(ctx, db, &events, audit.FormatJSONL, audit.Filter{})
		if res, _ := audit.VerifyBundle(&events, known); !strings.Contains(res.TreeMismatch, "no signed checkpoint") {
			t.Fatalf("events without checkpoints: %+v", res)
		}
		if err := audit.Export(ctx, db, &buf, audit.FormatBundle, audit.Filter{Actor: "x"}); err == nil {
			t.Fatal("a filtered bundle was written")
		}
	})
}

// TestKeyRotation: after the signing key is replaced, every stored
// checkpoint still verifies with the key stored beside it, and a bundle
// verifies with the old and the new public key together.
func TestKeyRotation(t *testing.T) {
	db := servertest.OpenDB(t, "", t.TempDir())
	dir := t.TempDir()
	origin := audit.Origin("prod")
	oldKey, err := audit.GenerateKeyFile(filepath.Join(dir, "old"), origin)
	if err != nil {
		t.Fatal(err)
	}
	newKey, err := audit.GenerateKeyFile(filepath.Join(dir, "new"), origin)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []*audit.Key{oldKey, newKey} {
		appendN(t, db, 3)
		if err := db.Transaction(func(tx *gorm.DB) error {
			_, err := audit.SignCheckpoint(tx, k, origin, time.Now())
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	cps, err := audit.Checkpoints(context.Background(), db)
	if err != nil || len(cps) != 2 || cps[0].Key != oldKey.Verifier || cps[1].Key != newKey.Verifier {
		t.Fatalf("checkpoints: %+v %v", cps, err)
	}
	for _, cp := range cps {
		known, _ := audit.Verifiers([]string{cp.Key})
		if c, err := audit.OpenCheckpoint([]byte(cp.Note), known); err != nil || c.Size != cp.Size {
			t.Fatalf("checkpoint %d with its stored key: %v", cp.Size, err)
		}
	}
	var buf bytes.Buffer
	if err := audit.Export(context.Background(), db, &buf, audit.FormatBundle, audit.Filter{}); err != nil {
		t.Fatal(err)
	}
	both, _ := audit.Verifiers([]string{oldKey.Verifier, newKey.Verifier})
	if res, err := audit.VerifyBundle(bytes.NewReader(buf.Bytes()), both); err != nil || !res.OK() || res.Checkpoints != 2 {
		t.Fatalf("bundle with both keys: %+v %v", res, err)
	}
	onlyNew, _ := audit.Verifiers([]string{newKey.Verifier})
	if res, _ := audit.VerifyBundle(bytes.NewReader(buf.Bytes()), onlyNew); !strings.Contains(res.TreeMismatch, "checkpoint of size 3") {
		t.Fatalf("bundle without the old key: %+v", res)
	}
}

// TestSyncTreeInStepTakesNoLock: a console starting while an audited
// transaction holds the chain's lock (a leader waiting on a row) does not
// wait for it when its tree is in step with the chain.
func TestSyncTreeInStepTakesNoLock(t *testing.T) {
	db := openPostgres(t)
	appendN(t, db, 3)
	held := db.Begin()
	defer held.Rollback()
	if err := audit.Lock(held); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if n, err := audit.SyncTree(ctx, db); err != nil || n != 3 {
		t.Fatalf("sync while the lock is held: %d %v", n, err)
	}
}
