package console_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
	"gorm.io/gorm"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/audit/witness"
	"github.com/switchyard-io/switchyard/internal/servertest"
	"github.com/switchyard-io/switchyard/server/console"
)

// transparencyConsole starts a leading console that signs a checkpoint
// after every event, on Postgres with a key file made for the test, or on
// the embedded SQLite with the key it generates in its data dir. It
// returns the console and its public key.
func transparencyConsole(t *testing.T, sqlite bool) (*console.Console, string) {
	t.Helper()
	e := newEnv(t)
	var keyFile string
	if !sqlite {
		keyFile = filepath.Join(t.TempDir(), "audit.key")
		if _, err := audit.GenerateKeyFile(keyFile, audit.Origin("default")); err != nil {
			t.Fatal(err)
		}
	}
	c := e.start(func(cfg *console.Config) {
		if sqlite {
			cfg.DatabaseURL = ""
		}
		cfg.AuditKeyFile = keyFile
		cfg.CheckpointEvents = 1
	})
	waitLeader(t, c)
	if c.AuditKey == nil {
		t.Fatal("no audit signing key")
	}
	return c, c.AuditKey.Verifier
}

// changes makes n audited changes (flips of one switch).
func changes(t *testing.T, c *console.Console, n int) {
	t.Helper()
	r := call(t, c, "GET", "/api/v1/apps/checkout/switches/witnessed", adminToken, "")
	if r.Status == 404 {
		mustStatus(t, call(t, c, "POST", "/api/v1/apps/checkout/switches", adminToken, `{"name":"witnessed","level":"L3","reason":"seed"}`), 201)
		n--
	}
	for i := range n {
		op := []string{"on", "off"}[i%2]
		if r := call(t, c, "POST", "/api/v1/apps/checkout/switches/witnessed/"+op, adminToken, fmt.Sprintf(`{"reason":"change %d"}`, i)); r.Status != 200 && r.Status != 409 {
			t.Fatalf("flip: %d %s", r.Status, r.Raw)
		}
	}
}

// checkpointed waits until the latest checkpoint covers the whole log and
// returns its size.
func checkpointed(t *testing.T, c *console.Console) int64 {
	t.Helper()
	ctx := context.Background()
	var size int64
	servertest.Eventually(t, 15*time.Second, "a checkpoint of the whole log", func() bool {
		n, err := audit.TreeSize(ctx, c.DB)
		cp, err2 := audit.LatestCheckpoint(ctx, c.DB)
		if err != nil || err2 != nil || cp == nil {
			return false
		}
		size = cp.Size
		return cp.Size == n
	})
	return size
}

// runWitness runs the witness against c with the state in dir.
func runWitness(c *console.Console, dir string, keys ...string) (witness.Result, error) {
	return witness.Run(context.Background(), witness.Config{
		URL: c.URL(), Token: adminToken, StateFile: filepath.Join(dir, "state"), Keys: keys,
	})
}

// refused asserts err is a witness refusal for reason.
func refused(t *testing.T, err error, reason string) {
	t.Helper()
	var we *audit.WitnessError
	if !errors.As(err, &we) || we.Reason != reason {
		t.Fatalf("witness: %v, want a refusal for %q", err, reason)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Fatalf("the reason is more than one line: %q", err)
	}
}

// tamper runs statements as a database writer who bypasses the audit
// tables' append-only triggers.
func tamper(t *testing.T, c *console.Console, fn func(tx *gorm.DB) error) {
	t.Helper()
	var err error
	if c.DB.Dialector.Name() == "postgres" {
		err = c.DB.Connection(func(tx *gorm.DB) error {
			if err := tx.Exec("SET session_replication_role = replica").Error; err != nil {
				return err
			}
			defer tx.Exec("SET session_replication_role = DEFAULT")
			return fn(tx.Session(&gorm.Session{}))
		})
	} else {
		err = c.DB.Connection(func(tx *gorm.DB) error {
			for _, trig := range []string{"audit_events_no_update", "audit_events_no_delete", "audit_tree_no_update",
				"audit_tree_no_delete", "audit_checkpoints_no_update", "audit_checkpoints_no_delete"} {
				if err := tx.Exec("DROP TRIGGER IF EXISTS " + trig).Error; err != nil {
					return err
				}
			}
			return fn(tx.Session(&gorm.Session{}))
		})
	}
	if err != nil {
		t.Fatal(err)
	}
}

func eachDialect(t *testing.T, fn func(t *testing.T, sqlite bool)) {
	t.Run("postgres", func(t *testing.T) { fn(t, false) })
	t.Run("sqlite", func(t *testing.T) { fn(t, true) })
}

// TestWitnessRewrittenHistory: a normal stream of changes between witness
// runs passes; an old event's reason changed in the database with the
// chain and the tree recomputed around it fails the next run naming
// consistency, and `audit verify` names the checkpoint the rewrite broke.
func TestWitnessRewrittenHistory(t *testing.T) {
	eachDialect(t, func(t *testing.T, sqlite bool) {
		c, pub := transparencyConsole(t, sqlite)
		dir := t.TempDir()
		changes(t, c, 4)
		first := checkpointed(t, c)
		res, err := runWitness(c, dir, pub)
		if err != nil || res.Previous != nil || res.Checkpoint.Size != first {
			t.Fatalf("first run: %+v %v", res, err)
		}
		changes(t, c, 3)
		second := checkpointed(t, c)
		res, err = runWitness(c, dir, pub)
		if err != nil || res.Previous == nil || res.Previous.Size != first || res.Checkpoint.Size != second {
			t.Fatalf("run after a normal stream of changes: %+v %v", res, err)
		}
		if _, err := runWitness(c, dir, pub); err != nil {
			t.Fatalf("run on an unchanged log: %v", err)
		}

		ctx := context.Background()
		tamper(t, c, func(tx *gorm.DB) error {
			if err := tx.Exec("UPDATE audit_events SET reason = 'nothing happened' WHERE id = 2").Error; err != nil {
				return err
			}
			var evs []audit.Event
			if err := tx.Order("id").Find(&evs).Error; err != nil {
				return err
			}
			prev := audit.GenesisHash
			for i := range evs {
				evs[i].PrevHash = prev
				evs[i].Hash = evs[i].ContentHash()
				prev = evs[i].Hash
				if err := tx.Exec("UPDATE audit_events SET prev_hash = ?, hash = ? WHERE id = ?", evs[i].PrevHash, evs[i].Hash, evs[i].ID).Error; err != nil {
					return err
				}
			}
			if err := tx.Exec("DELETE FROM audit_tree").Error; err != nil {
				return err
			}
			_, err := audit.SyncTree(ctx, tx)
			return err
		})
		vres, err := audit.Verify(ctx, c.DB)
		if err != nil || vres.Mismatch != nil || !strings.Contains(vres.TreeMismatch, "checkpoint of size") {
			t.Fatalf("verify after the rewrite: %+v %v", vres, err)
		}
		changes(t, c, 2)
		if checkpointed(t, c) <= second {
			t.Fatal("no new checkpoint")
		}
		_, err = runWitness(c, dir, pub)
		refused(t, err, audit.RefusedConsistency)
	})
}

// TestWitnessTruncated: deleting the newest events (and their tree hashes
// and checkpoints) fails the next run as truncated.
func TestWitnessTruncated(t *testing.T) {
	eachDialect(t, func(t *testing.T, sqlite bool) {
		c, pub := transparencyConsole(t, sqlite)
		dir := t.TempDir()
		changes(t, c, 6)
		size := checkpointed(t, c)
		if _, err := runWitness(c, dir, pub); err != nil {
			t.Fatal(err)
		}
		keep := size - 2
		tamper(t, c, func(tx *gorm.DB) error {
			for _, q := range []string{"DELETE FROM audit_events WHERE id > ?", "DELETE FROM audit_checkpoints WHERE size > ?"} {
				if err := tx.Exec(q, keep).Error; err != nil {
					return err
				}
			}
			return tx.Exec("DELETE FROM audit_tree WHERE idx >= ?", tlog.StoredHashCount(keep)).Error
		})
		if got := checkpointed(t, c); got != keep {
			t.Fatalf("latest checkpoint %d, want %d", got, keep)
		}
		_, err := runWitness(c, dir, pub)
		refused(t, err, audit.RefusedTruncated)
	})
}

// TestWitnessUnknownKey: a checkpoint signed by a key the witness was not
// given fails; the state is left as it was.
func TestWitnessUnknownKey(t *testing.T) {
	eachDialect(t, func(t *testing.T, sqlite bool) {
		c, pub := transparencyConsole(t, sqlite)
		changes(t, c, 2)
		checkpointed(t, c)
		_, other, err := note.GenerateKey(rand.Reader, audit.Origin("default"))
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		_, err = runWitness(c, dir, other)
		refused(t, err, audit.RefusedSignature)
		if _, err := runWitness(c, dir, "not-a-key"); err == nil || !strings.Contains(err.Error(), "key") {
			t.Fatalf("a malformed key: %v", err)
		}
		// The console's key, beside a retired one, is accepted.
		if _, err := runWitness(c, dir, other, pub); err != nil {
			t.Fatalf("with the console's key among others: %v", err)
		}
	})
}

// TestCheckpointProofsAPI: the proof endpoints serve a viewer; every event
// has an inclusion proof against the latest signed root; the checkpoint
// went out as an audit.checkpoint notification; bad queries name the
// field.
func TestCheckpointProofsAPI(t *testing.T) {
	c, pub := transparencyConsole(t, false)
	viewer := mustStatus(t, call(t, c, "POST", "/api/v1/tokens", adminToken, `{"name":"auditor","role":"viewer","reason":"outside audit"}`), 201).str("token")
	changes(t, c, 5)
	size := checkpointed(t, c)
	r := call(t, c, "GET", "/api/v1/audit/checkpoint", viewer, "")
	mustStatus(t, r, 200)
	v, err := note.NewVerifier(pub)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := audit.OpenCheckpoint([]byte(r.Raw), note.VerifierList(v))
	if err != nil || cp.Size != size || cp.Origin != "switchyard/default/audit" {
		t.Fatalf("checkpoint %q: %+v %v", r.Raw, cp, err)
	}
	for id := int64(1); id <= size; id++ {
		r := mustStatus(t, call(t, c, "GET", fmt.Sprintf("/api/v1/audit/proof/inclusion?id=%d", id), viewer, ""), 200)
		var p struct {
			Size      int64            `json:"size"`
			EventHash string           `json:"event_hash"`
			Proof     tlog.RecordProof `json:"proof"`
		}
		if err := json.Unmarshal([]byte(r.Raw), &p); err != nil {
			t.Fatal(err)
		}
		leaf, _ := audit.LeafData(&audit.Event{ID: id, Hash: p.EventHash})
		if err := tlog.CheckRecord(p.Proof, cp.Size, cp.Root, id-1, tlog.RecordHash(leaf)); err != nil || p.Size != size {
			t.Fatalf("inclusion of %d: %v (%s)", id, err, r.Raw)
		}
	}
	mustStatus(t, call(t, c, "GET", fmt.Sprintf("/api/v1/audit/proof/consistency?from=1&to=%d", size), viewer, ""), 200)
	for _, tc := range []struct{ q, field string }{
		{"inclusion", "id"}, {"inclusion?id=0", "id"}, {fmt.Sprintf("inclusion?id=%d", size+1), "id"},
		{"inclusion?id=1&size=999999", "size"}, {"consistency", "from"}, {"consistency?from=3&to=2", "from"},
		{"consistency?from=1&to=999999", "to"}, {"consistency?from=x", "from"},
	} {
		r := call(t, c, "GET", "/api/v1/audit/proof/"+tc.q, viewer, "")
		if r.Status != 400 || !strings.Contains(r.Raw, `"`+tc.field+`"`) {
			t.Errorf("%s: %d %s, want 400 naming %s", tc.q, r.Status, r.Raw, tc.field)
		}
	}
	var notes []struct{ Body, Data string }
	if err := c.DB.Table("notifications").Where("kind = ?", "audit.checkpoint").Order("id").Find(&notes).Error; err != nil || len(notes) == 0 {
		t.Fatalf("no audit.checkpoint notification: %v", err)
	}
	if !strings.Contains(notes[len(notes)-1].Body, "switchyard/default/audit") || !strings.Contains(notes[len(notes)-1].Data, base64.StdEncoding.EncodeToString(cp.Root[:])[:8]) {
		t.Fatalf("notification: %+v", notes[len(notes)-1])
	}
	r = mustStatus(t, call(t, c, "GET", "/api/v1/audit/checkpoints", viewer, ""), 200)
	if !strings.Contains(r.Raw, pub) {
		t.Fatalf("checkpoints lack the verifier key: %s", r.Raw)
	}
}
