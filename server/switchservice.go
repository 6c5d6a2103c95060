package server

import (
	"context"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/sdk/wire"
)

// ListSwitches returns the switches of app (all apps when app is "").
func (s *Service) ListSwitches(ctx context.Context, app string) ([]Switch, error) {
	out, _, err := s.SwitchPage(ctx, app, Page{})
	return out, err
}

// SwitchPage returns one page of ListSwitches and the cursor of the next.
func (s *Service) SwitchPage(ctx context.Context, app string, pg Page) ([]Switch, string, error) {
	return list[Switch](s.db.WithContext(ctx), app, pg)
}

// GetSwitch returns one switch.
func (s *Service) GetSwitch(ctx context.Context, app, name string) (*Switch, error) {
	sw, err := load[Switch](s.db.WithContext(ctx), app, name)
	return sw, mapDBError(err)
}

// switchOp is the entityOp of a change of switch app/name.
func switchOp(a Actor, app, name string, action audit.Action, reason string, version *int64) entityOp {
	return entityOp{Actor: a, Kind: outboxSwitch, App: app, Name: name, Action: action, Reason: reason, Version: version}
}

// CreateSwitch creates a switch in state off.
func (s *Service) CreateSwitch(ctx context.Context, a Actor, app string, in SwitchInput) (*Switch, Receipt, error) {
	return create(ctx, s, switchOp(a, app, in.Name, audit.SwitchCreate, in.Reason, nil), func() (*Switch, error) {
		return newSwitch(app, &in)
	})
}

// PatchSwitch changes descriptive and per-level fields.
func (s *Service) PatchSwitch(ctx context.Context, a Actor, app, name string, p SwitchPatch) (*Switch, Receipt, error) {
	return update(ctx, s, switchOp(a, app, name, audit.SwitchUpdate, p.Reason, p.Version).held(Pending{Kind: "switch.update", Switch: &p}), p.apply)
}

// TurnOn puts a switch on, optionally with a new rollout. Turning on an
// off switch starts its expiry clock from max_on; changing the rollout of
// a switch that is already on keeps its expiry.
func (s *Service) TurnOn(ctx context.Context, a Actor, app, name string, t Toggle) (*Switch, Receipt, error) {
	c, out, err := s.turnOnChange(a, app, name, t)
	return commitBuilt(ctx, s, c, out, err)
}

func (s *Service) turnOnChange(a Actor, app, name string, t Toggle) (change, **Switch, error) {
	c, out := updateChange[Switch](s, switchOp(a, app, name, audit.SwitchOn, t.Reason, t.Version).held(Pending{Kind: "switch.on", Toggle: &t}), func(sw *Switch) error {
		if t.Rollout != nil {
			if err := sw.setRollout(*t.Rollout); err != nil {
				return err
			}
		}
		sw.turnOn(s.now())
		return nil
	})
	return c, out, nil
}

// TurnOff puts a switch off.
func (s *Service) TurnOff(ctx context.Context, a Actor, app, name string, t Toggle) (*Switch, Receipt, error) {
	c, out, err := s.turnOffChange(a, app, name, t)
	return commitBuilt(ctx, s, c, out, err)
}

func (s *Service) turnOffChange(a Actor, app, name string, t Toggle) (change, **Switch, error) {
	if t.Rollout != nil {
		return change{}, nil, invalid("rollout", "is only accepted when turning a switch on")
	}
	c, out := updateChange[Switch](s, switchOp(a, app, name, audit.SwitchOff, t.Reason, t.Version).held(Pending{Kind: "switch.off", Toggle: &t}), func(sw *Switch) error {
		sw.turnOff()
		return nil
	})
	return c, out, nil
}

// RenewSwitch confirms a switch that is on: a person has looked at it
// and it stays on for another max_on, so its expiry moves to now + max_on
// (audited as switch.renew). A switch that is off is refused, naming
// "state"; the reason is mandatory, as for every change.
func (s *Service) RenewSwitch(ctx context.Context, a Actor, app, name string, c Change) (*Switch, Receipt, error) {
	return update(ctx, s, switchOp(a, app, name, audit.SwitchRenew, c.Reason, c.Version), func(sw *Switch) error {
		if sw.State != wire.StateOn {
			return invalid("state", "is off: only a switch that is on can be renewed")
		}
		d, err := ParseDuration(sw.MaxOn)
		if err != nil {
			return invalid("max_on", `must be a duration such as "24h" or "7d" to renew by`)
		}
		exp := s.now().Add(d)
		sw.ExpiresAt = &exp
		return nil
	})
}

// restoreChange puts a switch back to a recorded state (see
// JobTx.Restore).
func (s *Service) restoreChange(a Actor, app, name string, to SwitchState, reason string, version *int64) (change, **Switch, error) {
	if to.State != wire.StateOn && to.State != wire.StateOff {
		return change{}, nil, invalid("state", `must be "on" or "off"`)
	}
	c, out := updateChange[Switch](s, switchOp(a, app, name, audit.SwitchRestore, reason, version), func(sw *Switch) error {
		if err := sw.setRollout(to.Rollout); err != nil {
			return err
		}
		sw.State, sw.TurnedOnAt, sw.ExpiresAt = to.State, to.OnSince, to.ExpiresAt
		if to.State == wire.StateOff {
			sw.TurnedOnAt, sw.ExpiresAt = nil, nil
		}
		return nil
	})
	return c, out, nil
}

// commitBuilt commits a built change and returns what it wrote.
func commitBuilt[P any](ctx context.Context, s *Service, c change, out *P, err error) (P, Receipt, error) {
	var zero P
	if err != nil {
		return zero, Receipt{}, err
	}
	rc, err := s.commit(ctx, c)
	if err != nil {
		return zero, rc, err
	}
	return *out, rc, nil
}

// DeleteSwitch deletes a switch; its etcd key is removed by the publisher.
func (s *Service) DeleteSwitch(ctx context.Context, a Actor, app, name string, c Change) (Receipt, error) {
	return remove[Switch](ctx, s, switchOp(a, app, name, audit.SwitchDelete, c.Reason, c.Version).held(Pending{Kind: "switch.delete", Change: &c}))
}
