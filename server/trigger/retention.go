package trigger

import (
	"time"

	"gorm.io/gorm"
)

// PruneEvaluations deletes the rules' evaluations recorded before cut
// (server/retention); a rule's state does not depend on them.
func PruneEvaluations(tx *gorm.DB, cut time.Time) (int64, error) {
	res := tx.Where("at < ?", cut).Delete(&evaluationRow{})
	return res.RowsAffected, res.Error
}
