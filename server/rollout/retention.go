package rollout

import (
	"time"

	"gorm.io/gorm"
)

// PruneEnded deletes the plans that ended (done, aborted or reverted)
// before cut (server/retention); active plans stay whatever their age.
func PruneEnded(tx *gorm.DB, cut time.Time) (int64, error) {
	res := tx.Where("ended_at < ? AND state IN ?", cut, []string{Done, Aborted, Reverted}).Delete(&row{})
	return res.RowsAffected, res.Error
}
