package notify

import (
	"context"
	"time"
)

// Health is the delivery log's state for alerting: how many deliveries are
// waiting to retry after a failed attempt, and how many were given up
// (failed for good) within the last hour.
type Health struct {
	Retrying       int64
	FailedLastHour int64
}

// Health counts the deliveries that are failing as of now.
func (s *Service) Health(ctx context.Context, now time.Time) (Health, error) {
	var h Health
	db := s.db.WithContext(ctx).Model(&delivery{})
	if err := db.Where("status = ? AND attempts > 0", StatusPending).Count(&h.Retrying).Error; err != nil {
		return h, err
	}
	err := s.db.WithContext(ctx).Model(&delivery{}).
		Where("status = ? AND finished_at >= ?", StatusFailed, now.UTC().Add(-time.Hour)).Count(&h.FailedLastHour).Error
	return h, err
}
