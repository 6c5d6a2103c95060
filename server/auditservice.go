package server

import (
	"context"
	"io"

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
