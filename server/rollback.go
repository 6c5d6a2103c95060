package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"gorm.io/gorm"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/sdk/wire"
)

// RollbackTarget returns the state of switch app/name recorded by audit
// event eventID (the switch as it was right after that change), which must
// be a change made through the API ("switch.*"; a "drift" event records the
// etcd value, not the switch). Errors name the field "event".
func (s *Service) RollbackTarget(ctx context.Context, app, name string, eventID int64) (*SwitchView, error) {
	var ev audit.Event
	err := s.db.WithContext(ctx).Where("id = ?", eventID).Take(&ev).Error
	switch {
	case errors.Is(err, gorm.ErrRecordNotFound):
		return nil, invalid("event", fmt.Sprintf("audit event %d does not exist", eventID))
	case err != nil:
		return nil, mapDBError(err)
	}
	if ev.Target != (&Switch{App: app, Name: name}).Target() {
		return nil, invalid("event", fmt.Sprintf("audit event %d is about %s, not this switch", eventID, ev.Target))
	}
	if ev.Action.Entity() != "switch" {
		return nil, invalid("event", fmt.Sprintf("audit event %d is a %s, not a change of the switch", eventID, ev.Action))
	}
	if ev.After == "" {
		return nil, invalid("event", fmt.Sprintf("audit event %d records no state to restore", eventID))
	}
	var v SwitchView
	if err := json.Unmarshal([]byte(ev.After), &v); err != nil {
		return nil, invalid("event", "recorded state is unreadable")
	}
	return &v, nil
}

// RollbackSwitch restores a switch to the state RollbackTarget finds in
// audit event eventID. The rollback is a new audited change with action
// "switch.rollback"; the switch must still exist.
func (s *Service) RollbackSwitch(ctx context.Context, a Actor, app, name string, eventID int64, c Change) (*Switch, Receipt, error) {
	v, err := s.RollbackTarget(ctx, app, name, eventID)
	if err != nil {
		return nil, Receipt{}, err
	}
	return update(ctx, s, switchOp(a, app, name, audit.SwitchRollback, c.Reason, c.Version), func(sw *Switch) error {
		sw.Level, sw.Description, sw.Owner, sw.Runbook = v.Level, v.Description, v.Owner, v.Runbook
		sw.Fallback, sw.MaxStaleness, sw.MaxOn, sw.ExpiryPolicy = fallbackString(v.Fallback), v.MaxStaleness, v.MaxOn, v.ExpiryPolicy
		sw.WarmUp = v.WarmUp
		if err := sw.setRollout(v.Rollout); err != nil {
			return err
		}
		if v.State == wire.StateOn {
			sw.turnOn(s.now())
		} else {
			sw.turnOff()
		}
		return nil
	})
}
