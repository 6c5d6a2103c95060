package audit

import (
	"context"
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"golang.org/x/mod/sumdb/note"
	"gorm.io/gorm"
)

// Export formats.
const (
	FormatJSONL = "jsonl"
	FormatCSV   = "csv"
	// FormatBundle is the whole log for an offline verifier: the events as
	// JSON lines, then one {"checkpoint": …} line per signed checkpoint
	// (note and verifier key included). VerifyBundle checks it.
	FormatBundle = "bundle"
)

var csvHeader = []string{
	"id", "at", "actor", "actor_kind", "action", "target", "before", "after",
	"reason", "request_id", "remote_addr", "prev_hash", "hash", "cause",
}

// Export writes every event matching f to w in chain order, as JSON lines or
// CSV with a header row. The output carries the hashes, so an exported file
// can be verified on its own.
func Export(ctx context.Context, db *gorm.DB, w io.Writer, format string, f Filter) error {
	switch format {
	case FormatJSONL:
		enc := json.NewEncoder(w)
		return Each(ctx, db, f, func(e *Event) error { return enc.Encode(e) })
	case FormatBundle:
		if f != (Filter{}) {
			return errors.New("audit: a bundle holds the whole log: no filter")
		}
		enc := json.NewEncoder(w)
		if err := Each(ctx, db, f, func(e *Event) error { return enc.Encode(e) }); err != nil {
			return err
		}
		cps, err := Checkpoints(ctx, db)
		if err != nil {
			return err
		}
		for i := range cps {
			if err := enc.Encode(bundleLine{Checkpoint: &cps[i]}); err != nil {
				return err
			}
		}
		return nil
	case FormatCSV:
		cw := csv.NewWriter(w)
		if err := cw.Write(csvHeader); err != nil {
			return err
		}
		err := Each(ctx, db, f, func(e *Event) error {
			return cw.Write([]string{
				strconv.FormatInt(e.ID, 10), e.At.UTC().Format(time.RFC3339Nano), e.Actor, e.ActorKind,
				string(e.Action), e.Target, e.Before, e.After, e.Reason, e.RequestID, e.RemoteAddr, e.PrevHash, e.Hash, e.Cause,
			})
		})
		if err != nil {
			return err
		}
		cw.Flush()
		return cw.Error()
	default:
		return fmt.Errorf("audit: unknown export format %q (want jsonl, csv or bundle)", format)
	}
}

// bundleLine is a line of a bundle: an event, or a checkpoint after them.
type bundleLine struct {
	*Event
	Checkpoint *StoredCheckpoint `json:"checkpoint,omitempty"`
}

// VerifyBundle verifies an exported bundle without the database: the hash
// chain, then every checkpoint's signature with the trusted keys and its
// root against the tree rebuilt from the events. A bundle without a
// checkpoint proves nothing beyond its own chain and fails.
func VerifyBundle(r io.Reader, known note.Verifiers) (Result, error) {
	c := newChainCheck()
	dec := json.NewDecoder(r)
	var cps []*StoredCheckpoint
	for line := 1; ; line++ {
		var l bundleLine
		l.Event = new(Event)
		err := dec.Decode(&l)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return c.res, fmt.Errorf("audit: bundle line %d: %w", line, err)
		}
		if l.Checkpoint != nil {
			cps = append(cps, l.Checkpoint)
			continue
		}
		if len(cps) > 0 {
			return c.res, fmt.Errorf("audit: bundle line %d: an event after the checkpoints", line)
		}
		if ok, err := c.add(l.Event); !ok || err != nil {
			return c.res, err
		}
	}
	if err := c.finish(); err != nil {
		return c.res, err
	}
	if len(cps) == 0 {
		c.res.TreeMismatch = "the bundle holds no signed checkpoint"
		return c.res, nil
	}
	for _, sc := range cps {
		cp, err := OpenCheckpoint([]byte(sc.Note), known)
		if err != nil {
			c.res.TreeMismatch = fmt.Sprintf("checkpoint of size %d: %v", sc.Size, err)
			return c.res, nil
		}
		if cp.Size != sc.Size {
			c.res.TreeMismatch = fmt.Sprintf("checkpoint of size %d: its signed note says %d", sc.Size, cp.Size)
			return c.res, nil
		}
		if ok, err := c.checkpoint(cp.Size, base64.StdEncoding.EncodeToString(cp.Root[:])); !ok || err != nil {
			return c.res, err
		}
	}
	return c.res, nil
}
