package drill

import (
	"time"

	"gorm.io/gorm"

	"github.com/switchyard-io/switchyard/server/retention"
)

// PruneRuns deletes the runs that finished before cut (server/retention),
// except each switch's newest passing run, which the never_drilled
// finding reads whatever its age.
func PruneRuns(tx *gorm.DB, cut time.Time, limit int) (int64, error) {
	newestPass := tx.Model(&Run{}).Select("MAX(id)").Where("outcome = ? AND NOT dry_run", OutcomePassed).Group("app, switch_name")
	return retention.Delete(tx, &Run{}, limit, "finished_at < ? AND id NOT IN (?)", cut, newestPass)
}
