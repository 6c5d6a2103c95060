package server

import (
	"context"
	"strings"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/sdk/wire"
)

// ListLimits returns the limit rules of app (all apps when app is "").
func (s *Service) ListLimits(ctx context.Context, app string) ([]LimitRule, error) {
	out, _, err := s.LimitPage(ctx, app, Page{})
	return out, err
}

// LimitPage returns one page of ListLimits and the cursor of the next.
func (s *Service) LimitPage(ctx context.Context, app string, pg Page) ([]LimitRule, string, error) {
	return list[LimitRule](s.db.WithContext(ctx), app, pg)
}

// GetLimit returns one limit rule.
func (s *Service) GetLimit(ctx context.Context, app, resource string) (*LimitRule, error) {
	r, err := load[LimitRule](s.db.WithContext(ctx), app, resource)
	return r, mapDBError(err)
}

// CreateLimit creates a limit rule in state on (published and enforced).
func (s *Service) CreateLimit(ctx context.Context, a Actor, app string, in LimitInput) (*LimitRule, Receipt, error) {
	rule, explicit := in.rule()
	rule.App, rule.Version, rule.Resource = app, 0, strings.TrimSpace(rule.Resource)
	return create(ctx, s, limitOp(a, app, rule.Resource, audit.LimitCreate, in.Reason, nil), func() (*LimitRule, error) {
		explicit.AddErr("", validateLimit(&rule))
		if err := explicit.Err(); err != nil {
			return nil, err
		}
		return &LimitRule{
			App: app, Resource: rule.Resource, Kind: rule.Kind, State: wire.StateOn, Spec: spec(&rule),
			Description: strings.TrimSpace(in.Description),
		}, nil
	})
}

// PatchLimit merges new parameters into a rule.
func (s *Service) PatchLimit(ctx context.Context, a Actor, app, resource string, p LimitPatch) (*LimitRule, Receipt, error) {
	return update(ctx, s, limitOp(a, app, resource, audit.LimitUpdate, p.Reason, p.Version).held(Pending{Kind: "limit.update", Limit: &p}), func(r *LimitRule) error {
		merged, err := p.merge(r.Wire())
		if err != nil {
			return err
		}
		if p.Description != nil {
			r.Description = strings.TrimSpace(*p.Description)
		}
		r.Kind, r.Spec = merged.Kind, spec(merged)
		return nil
	})
}

// SetLimitState turns a rule on (published) or off (withdrawn from etcd);
// state must be "on" or "off".
func (s *Service) SetLimitState(ctx context.Context, a Actor, app, resource, state string, t Toggle) (*LimitRule, Receipt, error) {
	action := map[string]audit.Action{wire.StateOn: audit.LimitOn, wire.StateOff: audit.LimitOff}[state]
	if action == "" {
		return nil, Receipt{}, invalid("state", `must be "on" or "off"`)
	}
	if t.Rollout != nil {
		return nil, Receipt{}, invalid("rollout", "does not apply to limit rules")
	}
	return update(ctx, s, limitOp(a, app, resource, action, t.Reason, t.Version).held(Pending{Kind: string(action), Toggle: &t}), func(r *LimitRule) error {
		r.State = state
		return nil
	})
}

// DeleteLimit deletes a rule; its etcd key is removed by the publisher.
func (s *Service) DeleteLimit(ctx context.Context, a Actor, app, resource string, c Change) (Receipt, error) {
	return remove[LimitRule](ctx, s, limitOp(a, app, resource, audit.LimitDelete, c.Reason, c.Version).held(Pending{Kind: "limit.delete", Change: &c}))
}

// limitOp is the entityOp of a change of limit rule app/resource.
func limitOp(a Actor, app, resource string, action audit.Action, reason string, version *int64) entityOp {
	return entityOp{Actor: a, Kind: outboxLimit, App: app, Name: resource, Action: action, Reason: reason, Version: version}
}
