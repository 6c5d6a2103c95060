package trigger

import (
	"time"

	"gorm.io/gorm"

	"github.com/switchyard-io/switchyard/server/retention"
)

// PruneEvaluations deletes the rules' evaluations recorded before cut
// (server/retention); a rule's state does not depend on them.
func PruneEvaluations(tx *gorm.DB, cut time.Time, limit int) (int64, error) {
	return retention.Delete(tx, &evaluationRow{}, limit, "at < ?", cut)
}
