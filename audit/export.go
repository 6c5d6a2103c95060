package audit

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"

	"gorm.io/gorm"
)

// Export formats.
const (
	FormatJSONL = "jsonl"
	FormatCSV   = "csv"
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
		return fmt.Errorf("audit: unknown export format %q (want jsonl or csv)", format)
	}
}
