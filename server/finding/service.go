package finding

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"gorm.io/gorm"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/server"
)

// Service answers what people ask about the findings: the API's and the
// web console's lists and counts. Jobs open and resolve findings inside
// their own transactions (Open, Resolve).
type Service struct{ svc *server.Service }

// NewService returns the findings service over svc's database.
func NewService(svc *server.Service) *Service { return &Service{svc: svc} }

// List returns one page of the findings matching f, newest first, and
// the cursor of the next page.
func (s *Service) List(ctx context.Context, f Filter, pg server.Page) ([]Finding, string, error) {
	q, err := pg.Newest(f.where(s.svc.DB().WithContext(ctx)), "id")
	if err != nil {
		return nil, "", err
	}
	var out []Finding
	if err := q.Find(&out).Error; err != nil {
		return nil, "", unavailable(err)
	}
	out, next := server.Cut(out, pg, func(x *Finding) string { return server.IDKey(x.ID) })
	return out, next, nil
}

// OpenCounts returns the number of open findings matching f's kind, app
// and target, by severity: the counts of the list f selects.
func (s *Service) OpenCounts(ctx context.Context, f Filter) (map[string]int64, error) {
	counts, err := OpenCounts(s.svc.DB().WithContext(ctx), f)
	return counts, unavailable(err)
}

// Ack records that a person looked at open finding id: who, when and
// why. The finding stays open until its cause goes away. c.Version, when
// given, is the finding's version the person read; a stale one, a
// resolved finding and one acknowledged already are conflicts. Audited
// as finding.ack; the actor needs write access to the finding's app
// (admins for a finding of no app).
func (s *Service) Ack(ctx context.Context, a server.Actor, id int64, c server.Change) (*Finding, error) {
	var out Finding
	err := s.svc.Commit(ctx, server.Audited{Actor: a, Action: audit.FindingAck, Reason: c.Reason, App: s.appOf(ctx, id),
		Apply: func(tx *gorm.DB) (string, any, any, error) {
			if err := tx.Where("id = ?", id).Take(&out).Error; err != nil {
				if errors.Is(err, gorm.ErrRecordNotFound) {
					return "", nil, nil, fmt.Errorf("%w: finding %d", server.ErrNotFound, id)
				}
				return "", nil, nil, err
			}
			before := out
			if err := server.CheckVersion(c.Version, out.Version); err != nil {
				return "", nil, nil, err
			}
			switch {
			case out.ResolvedAt != nil:
				return "", nil, nil, server.Conflictf("finding %d is resolved (%s)", id, out.Resolution)
			case out.AckedBy != "":
				return "", nil, nil, server.Conflictf("finding %d is acknowledged already, by %s", id, out.AckedBy)
			}
			now := s.svc.Now().UTC()
			out.AckedBy, out.AckedAt, out.AckReason = a.Name, &now, strings.TrimSpace(c.Reason)
			out.Version++
			res := tx.Model(&Finding{}).Where("id = ? AND version = ?", id, before.Version).Updates(map[string]any{
				"acked_by": out.AckedBy, "acked_at": now, "ack_reason": out.AckReason, "version": out.Version,
			})
			if res.Error != nil {
				return "", nil, nil, res.Error
			}
			if res.RowsAffected == 0 {
				return "", nil, nil, server.ChangedConcurrently(out.auditTarget(), c.Version)
			}
			return out.auditTarget(), before, out, nil
		}})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// appOf is the app of finding id, for the right to acknowledge it ("" when
// it cannot be read: then only an admin passes, and Ack answers why).
func (s *Service) appOf(ctx context.Context, id int64) string {
	var f Finding
	_ = s.svc.DB().WithContext(ctx).Select("app").Where("id = ?", id).Take(&f).Error
	return f.App
}

func unavailable(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: %w", server.ErrUnavailable, err)
}
