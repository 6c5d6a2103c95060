package witness_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/audit/witness"
)

// fakeLog serves whatever signed checkpoint the test sets: a console that
// shows different readers different logs.
type fakeLog struct {
	srv  *httptest.Server
	note []byte
}

func newFakeLog(t *testing.T) *fakeLog {
	f := &fakeLog{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/audit/checkpoint" || r.Header.Get("Authorization") != "Bearer tok" {
			http.Error(w, "no", http.StatusNotFound)
			return
		}
		w.Write(f.note)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func sign(t *testing.T, skey string, size int64, root tlog.Hash) []byte {
	t.Helper()
	s, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	cp := audit.Checkpoint{Origin: audit.Origin("prod"), Size: size, Root: root}
	msg, err := note.Sign(&note.Note{Text: cp.Text()}, s)
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

// TestSplitView: two checkpoints of one size with different roots (a log
// forked for different readers) fail the second run; the state keeps the
// first. A note whose signature does not match its text fails too.
func TestSplitView(t *testing.T) {
	skey, vkey, err := note.GenerateKey(rand.Reader, audit.Origin("prod"))
	if err != nil {
		t.Fatal(err)
	}
	f := newFakeLog(t)
	state := filepath.Join(t.TempDir(), "state")
	cfg := witness.Config{URL: f.srv.URL, Token: "tok", StateFile: state, Keys: []string{vkey}}
	f.note = sign(t, skey, 7, sha256.Sum256([]byte("one")))
	if _, err := witness.Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	kept, _ := os.ReadFile(state)
	f.note = sign(t, skey, 7, sha256.Sum256([]byte("two")))
	_, err = witness.Run(context.Background(), cfg)
	var we *audit.WitnessError
	if !errors.As(err, &we) || we.Reason != audit.RefusedSplitView || !strings.Contains(err.Error(), "two roots for size 7") {
		t.Fatalf("split view: %v", err)
	}
	if now, _ := os.ReadFile(state); !bytes.Equal(now, kept) {
		t.Fatal("a refused checkpoint replaced the state")
	}
	forged := sign(t, skey, 9, sha256.Sum256([]byte("three")))
	f.note = bytes.Replace(forged, []byte("\n9\n"), []byte("\n8\n"), 1)
	if _, err = witness.Run(context.Background(), cfg); !errors.As(err, &we) || we.Reason != audit.RefusedSignature {
		t.Fatalf("a note edited after signing: %v", err)
	}
}
