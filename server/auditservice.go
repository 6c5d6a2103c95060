package server

import (
	"context"
	"fmt"
	"io"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/switchyard-io/switchyard/audit"
)

// ListAudit returns the audit events matching f, newest first, and the
// cursor of the next page (0 when there is none).
func (s *Service) ListAudit(ctx context.Context, f audit.Filter) ([]audit.Event, int64, error) {
	events, next, err := audit.List(ctx, s.db, f)
	return events, next, mapDBError(err)
}

// VerifyAudit walks the audit chain (see audit.Verify).
func (s *Service) VerifyAudit(ctx context.Context) (audit.Result, error) {
	res, err := audit.Verify(ctx, s.db)
	return res, mapDBError(err)
}

// ExportAudit writes the events matching f to w (see audit.Export).
func (s *Service) ExportAudit(ctx context.Context, w io.Writer, format string, f audit.Filter) error {
	if format != audit.FormatJSONL && format != audit.FormatCSV {
		return invalid("format", `must be "jsonl" or "csv"`)
	}
	return mapDBError(audit.Export(ctx, s.db, w, format, f))
}

// LatestCheckpoint returns the newest signed checkpoint of the audit log,
// or ErrNotFound before the first.
func (s *Service) LatestCheckpoint(ctx context.Context) (*audit.StoredCheckpoint, error) {
	cp, err := audit.LatestCheckpoint(ctx, s.db)
	if err != nil {
		return nil, mapDBError(err)
	}
	if cp == nil {
		return nil, fmt.Errorf("%w: no audit checkpoint is signed yet", ErrNotFound)
	}
	return cp, nil
}

// AuditCheckpoints returns one page of the signed checkpoints, oldest
// (smallest) first, and the cursor of the next page.
func (s *Service) AuditCheckpoints(ctx context.Context, pg Page) ([]audit.StoredCheckpoint, string, error) {
	q, err := pg.Oldest(s.db.WithContext(ctx), "size")
	if err != nil {
		return nil, "", err
	}
	var cps []audit.StoredCheckpoint
	if err := q.Find(&cps).Error; err != nil {
		return nil, "", unavailable(err)
	}
	cps, next := Cut(cps, pg, func(cp *audit.StoredCheckpoint) string { return IDKey(cp.Size) })
	return cps, next, nil
}

// InclusionProof proves that an event is in the audit tree of a size.
type InclusionProof struct {
	ID        int64            `json:"id"`
	LeafIndex int64            `json:"leaf_index"`
	Size      int64            `json:"size"`
	EventHash string           `json:"event_hash"`
	Proof     tlog.RecordProof `json:"proof"`
}

// ConsistencyProof proves that the audit tree of size To extends the tree
// of size From.
type ConsistencyProof struct {
	From  int64          `json:"from"`
	To    int64          `json:"to"`
	Proof tlog.TreeProof `json:"proof"`
}

// ProveInclusion proves that event id is in the tree of size events (0:
// the latest checkpoint's size, else the whole log).
func (s *Service) ProveInclusion(ctx context.Context, id, size int64) (*InclusionProof, error) {
	total, err := audit.TreeSize(ctx, s.db)
	if err != nil {
		return nil, mapDBError(err)
	}
	if size == 0 {
		size = total
		if cp, err := audit.LatestCheckpoint(ctx, s.db); err != nil {
			return nil, mapDBError(err)
		} else if cp != nil {
			size = cp.Size
		}
	}
	if size < 1 || size > total {
		return nil, invalid("size", fmt.Sprintf("must be between 1 and the log's %d events", total))
	}
	if id < 1 || id > size {
		return nil, invalid("id", fmt.Sprintf("must be an event of the tree: 1 to %d", size))
	}
	var e audit.Event
	if err := s.db.WithContext(ctx).Take(&e, id).Error; err != nil {
		return nil, mapDBError(err)
	}
	p, err := audit.ProveInclusion(ctx, s.db, size, id)
	if err != nil {
		return nil, mapDBError(err)
	}
	return &InclusionProof{ID: id, LeafIndex: id - 1, Size: size, EventHash: e.Hash, Proof: p}, nil
}

// ProveConsistency proves that the tree of size to (0: the whole log)
// extends the tree of size from.
func (s *Service) ProveConsistency(ctx context.Context, from, to int64) (*ConsistencyProof, error) {
	total, err := audit.TreeSize(ctx, s.db)
	if err != nil {
		return nil, mapDBError(err)
	}
	if to == 0 {
		to = total
	}
	if to < 1 || to > total {
		return nil, invalid("to", fmt.Sprintf("must be between 1 and the log's %d events", total))
	}
	if from < 1 || from > to {
		return nil, invalid("from", fmt.Sprintf("must be between 1 and to (%d)", to))
	}
	p, err := audit.ProveConsistency(ctx, s.db, from, to)
	if err != nil {
		return nil, mapDBError(err)
	}
	return &ConsistencyProof{From: from, To: to, Proof: p}, nil
}
