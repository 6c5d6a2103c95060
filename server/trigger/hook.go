package trigger

import (
	"fmt"

	"gorm.io/gorm"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/server"
)

// OnPersonChange pauses the enforcing rules of a switch a person just
// changed, inside the transaction of that change (register it with
// server.Service.OnPersonChange): people win. Each pause is audited as the
// person's (trigger.pause, naming what they did); a rule stays paused
// until a person resumes it. Dry-run rules change nothing and keep
// evaluating. A renewal or a metadata-only edit pauses nothing: it does
// not change what the switch does.
func (s *Service) OnPersonChange(j *server.JobTx, c server.PersonChange) error {
	if !c.Behaviour {
		return nil
	}
	tx := j.DB()
	var rules []Rule
	if err := tx.Where("app = ? AND switch_name = ? AND mode = ?", c.App, c.Name, ModeEnforce).Order("id").Find(&rules).Error; err != nil {
		return err
	}
	for i := range rules {
		r := &rules[i]
		row, st, err := loadState(tx, r.ID)
		if err != nil {
			return err
		}
		if st.Paused {
			continue
		}
		before := r.view(row, st)
		why := fmt.Sprintf("%s made %s on %s", c.Actor.Name, c.Action, r.SwitchTarget())
		next := st.Pause(c.Actor.Name, why, c.At)
		if err := saveState(tx, row, next, nil, c.At); err != nil {
			return err
		}
		after := r.view(row, next)
		err = j.Commit(server.Audited{Actor: c.Actor, Action: audit.TriggerPause, App: r.App,
			Reason: "paused automatically: " + why + "; resume the rule to hand the switch back to it",
			Apply:  func(*gorm.DB) (string, any, any, error) { return r.Target(), before, after, nil }})
		if err != nil {
			return err
		}
	}
	return nil
}
