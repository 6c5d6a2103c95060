// Package witness checks a console's audit log from outside: it fetches the
// latest signed checkpoint over the API, verifies its signature with keys
// it was given, checks that it extends the last checkpoint it accepted
// (audit.Witness), and keeps that checkpoint in a state file of its own.
// Run from cron on another machine, it detects a log rewritten, truncated
// or shown differently to different readers, whoever controls the
// console's database. See docs/audit.md.
package witness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/switchyard-io/switchyard/audit"
)

// Config is one witness run.
type Config struct {
	// URL is the console's base URL ("https://switchyard.example").
	URL string
	// Token is a bearer token of any role (viewers may read proofs).
	Token string
	// StateFile keeps the last accepted checkpoint (a signed note).
	StateFile string
	// Keys are the trusted verifier keys ("name+hash+base64"): the
	// console's current key, and its earlier ones after a rotation.
	Keys []string
	// Client makes the requests (default: a client with a 30s timeout).
	Client *http.Client
}

// Result is a run that accepted the log's latest checkpoint.
type Result struct {
	Checkpoint audit.Checkpoint
	// Previous is the checkpoint accepted before (nil on the first run).
	Previous *audit.Checkpoint
}

// Run fetches the latest checkpoint, checks it against the state and, when
// it holds, stores it as the new state. A refusal is an
// *audit.WitnessError and leaves the state as it was.
func Run(ctx context.Context, cfg Config) (Result, error) {
	var res Result
	known, err := audit.Verifiers(cfg.Keys)
	if err != nil {
		return res, err
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 30 * time.Second}
	}
	if res.Previous, err = loadState(cfg.StateFile, known); err != nil {
		return res, err
	}
	msg, err := get(ctx, cfg, "/api/v1/audit/checkpoint")
	if err != nil {
		return res, err
	}
	prove := func(from, to int64) (tlog.TreeProof, error) {
		body, err := get(ctx, cfg, "/api/v1/audit/proof/consistency?from="+strconv.FormatInt(from, 10)+"&to="+strconv.FormatInt(to, 10))
		if err != nil {
			return nil, err
		}
		var p struct {
			Proof tlog.TreeProof `json:"proof"`
		}
		if err := json.Unmarshal(body, &p); err != nil {
			return nil, fmt.Errorf("witness: consistency proof: %w", err)
		}
		return p.Proof, nil
	}
	if res.Checkpoint, err = audit.Witness(res.Previous, msg, known, prove); err != nil {
		return res, err
	}
	if res.Previous != nil && res.Previous.Size == res.Checkpoint.Size {
		return res, nil // nothing new to keep
	}
	return res, audit.WriteFileAtomic(cfg.StateFile, msg, 0o644)
}

// loadState reads the last accepted checkpoint; none on the first run. The
// state was verified when it was accepted: a key since retired from the
// trusted list does not make it unreadable.
func loadState(path string, known note.Verifiers) (*audit.Checkpoint, error) {
	if path == "" {
		return nil, errors.New("witness: no state file (--state)")
	}
	msg, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("witness: state: %w", err)
	}
	n, err := note.Open(msg, known)
	var unverified *note.UnverifiedNoteError
	if errors.As(err, &unverified) {
		n, err = unverified.Note, nil
	}
	if err != nil {
		return nil, fmt.Errorf("witness: state %s: %w", path, err)
	}
	cp, err := audit.ParseCheckpoint(n.Text)
	if err != nil {
		return nil, fmt.Errorf("witness: state %s: %w", path, err)
	}
	return &cp, nil
}

// get fetches path from the console; anything but 200 is an error naming
// the status and the problem's title.
func get(ctx context.Context, cfg Config, path string) ([]byte, error) {
	base, err := url.Parse(strings.TrimRight(cfg.URL, "/"))
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return nil, fmt.Errorf("witness: --url %q is not an http(s) URL", cfg.URL)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base.String()+path, nil)
	if err != nil {
		return nil, err
	}
	if cfg.Token != "" {
		req.Header.Set("Authorization", "Bearer "+cfg.Token)
	}
	resp, err := cfg.Client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("witness: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("witness: %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		var p struct {
			Title  string `json:"title"`
			Detail string `json:"detail"`
		}
		_ = json.Unmarshal(body, &p)
		return nil, fmt.Errorf("witness: GET %s: %s %s", strings.SplitN(path, "?", 2)[0], resp.Status, strings.TrimSpace(p.Title+" "+p.Detail))
	}
	return body, nil
}
