package finding

import (
	"context"
	"fmt"

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

func unavailable(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: %w", server.ErrUnavailable, err)
}
