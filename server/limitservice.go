package server

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"gorm.io/gorm"

	"github.com/switchyard-io/switchyard/sdk/wire"
)

// ListLimits returns the limit rules of app (all apps when app is "").
func (s *Service) ListLimits(ctx context.Context, app string) ([]LimitRule, error) {
	var out []LimitRule
	q := s.db.WithContext(ctx).Order("app, resource")
	if app != "" {
		q = q.Where("app = ?", app)
	}
	if err := q.Find(&out).Error; err != nil {
		return nil, unavailable(err)
	}
	return out, nil
}

// GetLimit returns one limit rule.
func (s *Service) GetLimit(ctx context.Context, app, resource string) (*LimitRule, error) {
	r, err := loadLimit(s.db.WithContext(ctx), app, resource)
	return r, mapDBError(err)
}

func loadLimit(tx *gorm.DB, app, resource string) (*LimitRule, error) {
	var r LimitRule
	if err := tx.Where("app = ? AND resource = ?", app, resource).Take(&r).Error; err != nil {
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return nil, fmt.Errorf("%w: limit rule %s/%s", ErrNotFound, app, resource)
		}
		return nil, err
	}
	return &r, nil
}

// CreateLimit creates a limit rule in state on (published and enforced).
func (s *Service) CreateLimit(ctx context.Context, a Actor, app string, in LimitInput) (*LimitRule, Receipt, error) {
	rule := in.LimitRule
	rule.App, rule.Version = app, 0
	var out *LimitRule
	rc, err := s.commit(ctx, change{
		actor: a, action: "limit.create", reason: in.Reason, kind: outboxLimit, app: app, name: strings.TrimSpace(rule.Resource),
		apply: func(tx *gorm.DB) (string, any, any, error) {
			if err := validateLimit(&rule); err != nil {
				return "", nil, nil, err
			}
			if len(in.Description) > maxDescriptionLen {
				return "", nil, nil, invalid("description", "must be at most 2000 characters")
			}
			now := s.now()
			out = &LimitRule{
				App: app, Resource: rule.Resource, Kind: rule.Kind, State: wire.StateOn, Spec: spec(&rule),
				Description: strings.TrimSpace(in.Description), Version: 1, Reason: strings.TrimSpace(in.Reason),
				UpdatedBy: a.Name, UpdatedAt: now, CreatedAt: now,
			}
			if err := tx.Create(out).Error; err != nil {
				return "", nil, nil, err
			}
			return out.Target(), nil, out.View(), nil
		},
	})
	if errors.Is(err, ErrAlreadyExists) {
		err = fmt.Errorf("%w: limit rule %s/%s", ErrAlreadyExists, app, rule.Resource)
	}
	if err != nil {
		return nil, rc, err
	}
	return out, rc, nil
}

// updateLimit loads a rule, lets mutate change it and writes it back
// guarded by its version.
func (s *Service) updateLimit(ctx context.Context, a Actor, app, resource, action, reason string, expected *int64, mutate func(r *LimitRule) error) (*LimitRule, Receipt, error) {
	var out *LimitRule
	rc, err := s.commit(ctx, change{
		actor: a, action: action, reason: reason, kind: outboxLimit, app: app, name: resource,
		apply: func(tx *gorm.DB) (string, any, any, error) {
			cur, err := loadLimit(tx, app, resource)
			if err != nil {
				return "", nil, nil, err
			}
			next := *cur
			if err := mutate(&next); err != nil {
				return "", nil, nil, err
			}
			if err := checkVersion(expected, cur.Version); err != nil {
				return "", nil, nil, err
			}
			next.Version = cur.Version + 1
			next.Reason, next.UpdatedBy, next.UpdatedAt = strings.TrimSpace(reason), a.Name, s.now()
			res := tx.Model(&LimitRule{}).Where("id = ? AND version = ?", cur.ID, cur.Version).
				Select("*").Omit("id", "created_at").Updates(&next)
			if res.Error != nil {
				return "", nil, nil, res.Error
			}
			if res.RowsAffected == 0 {
				return "", nil, nil, fmt.Errorf("%w: limit rule %s/%s changed concurrently", ErrConflict, app, resource)
			}
			out = &next
			return next.Target(), cur.View(), next.View(), nil
		},
	})
	return out, rc, err
}

// PatchLimit merges new parameters into a rule.
func (s *Service) PatchLimit(ctx context.Context, a Actor, app, resource string, p LimitPatch) (*LimitRule, Receipt, error) {
	return s.updateLimit(ctx, a, app, resource, "limit.update", p.Reason, p.Version, func(r *LimitRule) error {
		merged, err := p.merge(r.Wire())
		if err != nil {
			return err
		}
		if err := validateLimit(merged); err != nil {
			return err
		}
		if p.Description != nil {
			if len(*p.Description) > maxDescriptionLen {
				return invalid("description", "must be at most 2000 characters")
			}
			r.Description = strings.TrimSpace(*p.Description)
		}
		r.Kind, r.Spec = merged.Kind, spec(merged)
		return nil
	})
}

// SetLimitState turns a rule on (published) or off (withdrawn from etcd).
func (s *Service) SetLimitState(ctx context.Context, a Actor, app, resource, state string, t Toggle) (*LimitRule, Receipt, error) {
	if t.Rollout != nil {
		return nil, Receipt{}, invalid("rollout", "does not apply to limit rules")
	}
	return s.updateLimit(ctx, a, app, resource, "limit."+state, t.Reason, t.Version, func(r *LimitRule) error {
		r.State = state
		return nil
	})
}

// DeleteLimit deletes a rule; its etcd key is removed by the publisher.
func (s *Service) DeleteLimit(ctx context.Context, a Actor, app, resource string, c Change) (Receipt, error) {
	return s.commit(ctx, change{
		actor: a, action: "limit.delete", reason: c.Reason, kind: outboxLimit, app: app, name: resource,
		apply: func(tx *gorm.DB) (string, any, any, error) {
			cur, err := loadLimit(tx, app, resource)
			if err != nil {
				return "", nil, nil, err
			}
			if err := checkVersion(c.Version, cur.Version); err != nil {
				return "", nil, nil, err
			}
			res := tx.Where("id = ? AND version = ?", cur.ID, cur.Version).Delete(&LimitRule{})
			if res.Error != nil {
				return "", nil, nil, res.Error
			}
			if res.RowsAffected == 0 {
				return "", nil, nil, fmt.Errorf("%w: limit rule %s/%s changed concurrently", ErrConflict, app, resource)
			}
			return cur.Target(), cur.View(), nil, nil
		},
	})
}
