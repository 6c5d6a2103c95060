package rollout

import (
	"time"

	"gorm.io/gorm"

	"github.com/switchyard-io/switchyard/server/retention"
)

// PruneEnded deletes the plans that ended (done, aborted or reverted)
// before cut (server/retention); active plans stay whatever their age.
func PruneEnded(tx *gorm.DB, cut time.Time, limit int) (int64, error) {
	return retention.Delete(tx, &row{}, limit, "ended_at < ? AND state IN ?", cut, []string{Done, Aborted, Reverted})
}
