package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/sdk/wire"
	"github.com/switchyard-io/switchyard/server/policy"
)

// This file is the approval gate of the change path: record asks
// policy.Decide about every change of a switch or a limit rule, by every
// actor, once Apply has shown the entity before and after. A held change
// is rolled back and becomes a change request (changerequest.go); a
// change applied through an approved request or a break-glass passes.

// AppPolicy is an app's approval policy as stored.
type AppPolicy struct {
	App          string    `gorm:"primaryKey" json:"app"`
	Protected    bool      `json:"protected"`
	Approvals    int       `json:"approvals"`
	Rules        *string   `json:"-"`
	NoBreakGlass bool      `json:"no_break_glass"`
	Version      int64     `json:"version"`
	Reason       string    `json:"reason"`
	UpdatedBy    string    `json:"updated_by"`
	UpdatedAt    time.Time `json:"updated_at"`
}

// TableName pins the table name.
func (AppPolicy) TableName() string { return "app_policies" }

// Policy returns the policy Decide reads.
func (p *AppPolicy) Policy() policy.Policy {
	out := policy.Policy{Protected: p.Protected, Approvals: p.Approvals, NoBreakGlass: p.NoBreakGlass}
	if p.Rules != nil {
		_ = json.Unmarshal([]byte(*p.Rules), &out.Rules) // written by SetPolicy
	}
	return out
}

// PolicyView is the API representation of an app's policy.
type PolicyView struct {
	AppPolicy
	Rules []policy.Rule `json:"rules"`
}

// View returns the API representation (the rules it holds, defaults
// included).
func (p *AppPolicy) View() PolicyView { return PolicyView{AppPolicy: *p, Rules: p.Policy().Held()} }

// PolicyInput sets an app's policy.
type PolicyInput struct {
	Protected    bool          `json:"protected"`
	Approvals    int           `json:"approvals"`
	Rules        []policy.Rule `json:"rules"`
	NoBreakGlass bool          `json:"no_break_glass"`
	Version      *int64        `json:"version"`
	Reason       string        `json:"reason"`
}

// ErrApprovalRequired: the policy holds the change for approval; nothing
// was applied. The error is an *ApprovalRequired.
var ErrApprovalRequired = errors.New("server: approval required")

// ApprovalRequired is a change the policy held. Request is the change
// request it became (nil when the change cannot be stored as one).
type ApprovalRequired struct {
	Decision policy.Decision
	Request  *ChangeRequest
	// version is the target's version when the change was held.
	version int64
}

func (e *ApprovalRequired) Error() string {
	msg := ErrApprovalRequired.Error() + ": " + e.Decision.Why
	if e.Request != nil {
		msg += fmt.Sprintf("; request %d waits for it", e.Request.ID)
	}
	return msg
}

func (e *ApprovalRequired) Unwrap() error { return ErrApprovalRequired }

// grant lets a held change through: an approved change request being
// applied, or a break-glass.
type grant struct {
	request    *ChangeRequest // nil: a direct break-glass
	approvals  int
	breakGlass bool
	// consume marks the request applied inside the change's transaction;
	// it fails when another apply won.
	consume func(tx *gorm.DB) error
}

type grantKey struct{}

// WithBreakGlass marks the changes made with ctx as break-glass: a change
// the policy holds applies at once, audited as such, announced on every
// channel and reviewed (OnApproval). The change's reason is mandatory as
// always.
func WithBreakGlass(ctx context.Context) context.Context {
	return context.WithValue(ctx, grantKey{}, &grant{breakGlass: true})
}

func grantOf(ctx context.Context) *grant {
	g, _ := ctx.Value(grantKey{}).(*grant)
	return g
}

// gateChange describes a change of a switch or a limit rule for the
// policy from the entity before and after (nil when absent).
func gateChange(c change, before, after any) (policy.Change, int64, bool) {
	pc := policy.Change{App: c.Publish.app, Person: c.Actor.Person(), Cause: c.Actor.Cause}
	var version int64
	switch c.Publish.kind {
	case outboxSwitch:
		b, hasB := before.(SwitchView)
		a, hasA := after.(SwitchView)
		switch {
		case !hasB && !hasA:
			return pc, 0, false
		case !hasB:
			pc.Kind, pc.Level, pc.To = "switch.create", string(a.Level), a.State
		case !hasA:
			pc.Kind, pc.Level, pc.From, version = "switch.delete", string(b.Level), b.State, b.Version
		default:
			pc.Level, pc.From, pc.To, version = string(a.Level), b.State, a.State, b.Version
			switch {
			case b.State == wire.StateOff && a.State == wire.StateOn:
				pc.Kind = "switch.on"
			case b.State == wire.StateOn && a.State == wire.StateOff:
				pc.Kind = "switch.off"
			case b.Level != a.Level:
				pc.Kind = "switch.update"
			default:
				pc.Kind = "switch.on" // on → on: a rollout or metadata change, never held
				if a.State == wire.StateOff {
					pc.Kind = "switch.update"
				}
			}
		}
	case outboxLimit:
		b, hasB := before.(LimitView)
		a, hasA := after.(LimitView)
		switch {
		case !hasB && !hasA:
			return pc, 0, false
		case !hasB:
			pc.Kind, pc.To = "limit.create", a.State
		case !hasA:
			pc.Kind, pc.From, version = "limit.delete", b.State, b.Version
		default:
			pc.From, pc.To, version = b.State, a.State, b.Version
			switch {
			case b.State == wire.StateOn && a.State == wire.StateOff:
				pc.Kind, pc.Loosens = "limit.off", true
			case b.State == wire.StateOff && a.State == wire.StateOn:
				pc.Kind = "limit.on"
			default:
				pc.Kind, pc.Loosens = "limit.update", a.State == wire.StateOn && loosens(b.LimitRule, a.LimitRule)
			}
		}
	default:
		// A job domain's change the policy may hold: a new or changed
		// auto-trigger or drill. Its jobs then act under that approval.
		switch c.Action {
		case audit.TriggerCreate, audit.TriggerUpdate, audit.DrillCreate, audit.DrillUpdate:
			if c.Pending == nil {
				return pc, 0, false
			}
			pc.Kind, pc.App = string(c.Action), c.Pending.App
			return pc, 0, true
		}
		return pc, 0, false
	}
	return pc, version, true
}

// rolloutChange describes a staged rollout plan for the policy: a plan
// that turns its switch on engages it, so it is held like turning the
// switch on at its level.
func rolloutChange(tx *gorm.DB, c change) (policy.Change, bool) {
	var in struct {
		Direction string `json:"direction"`
	}
	_ = json.Unmarshal(c.Pending.Body, &in)
	sw, err := load[Switch](tx, c.Pending.App, c.Pending.Name)
	if err != nil {
		return policy.Change{}, false
	}
	to := wire.StateOn // a plan's direction defaults to on
	if in.Direction == wire.StateOff {
		to = wire.StateOff
	}
	return policy.Change{Kind: string(audit.RolloutCreate), Level: string(sw.Level), From: sw.State, To: to,
		App: c.Pending.App, Person: c.Actor.Person(), Cause: c.Actor.Cause}, true
}

// gate decides c inside tx. It answers the cause to record on the audit
// event ("" : none) or an error that rolls the change back: an
// *ApprovalRequired, or ErrForbidden for a refused break-glass.
func (s *Service) gate(tx *gorm.DB, c change, before, after any) (string, error) {
	pc, version, ok := gateChange(c, before, after)
	if !ok && c.Action == audit.RolloutCreate && c.Pending != nil {
		pc, ok = rolloutChange(tx, c)
	}
	if !ok {
		return "", nil
	}
	g := grantOf(tx.Statement.Context)
	pc.BreakGlass = g != nil && g.breakGlass
	var row AppPolicy
	if err := tx.Where("app = ?", pc.App).Limit(1).Find(&row).Error; err != nil {
		return "", err
	}
	d := policy.Decide(row.Policy(), pc)
	switch {
	case d.Outcome == policy.Refuse:
		return "", fmt.Errorf("%w: %s", ErrForbidden, d.Why)
	case d.Outcome == policy.NeedsApproval && (g == nil || g.request == nil || g.approvals < d.Approvals):
		if g != nil && g.request != nil {
			return "", Conflictf("request %d has %d of the %d approvals the policy of %s now asks", g.request.ID, g.approvals, d.Approvals, pc.App)
		}
		return "", &ApprovalRequired{Decision: d, version: version}
	}
	cause := ""
	if g != nil && g.request != nil {
		if err := g.consume(tx); err != nil {
			return "", err
		}
		cause = fmt.Sprintf("request/%d", g.request.ID)
	}
	if d.BreakGlass {
		cause = "break-glass" + prefixed(" ", cause)
		if err := s.tellApproval(tx, ApprovalEvent{
			Kind: EventBreakGlass, Actor: c.Actor, App: pc.App, Target: c.Publish.target(), Rule: string(d.Rule),
			Reason: c.Reason, Request: g.request, At: s.now(),
		}); err != nil {
			return "", err
		}
	}
	return cause, nil
}

func prefixed(sep, s string) string {
	if s == "" {
		return ""
	}
	return sep + s
}

// loosens reports whether limit rule a lets more through than b. A
// change whose direction it cannot tell — another kind, scope or key, or
// changed overload parameters — counts as loosening.
func loosens(b, a *wire.LimitRule) bool {
	if b == nil || a == nil {
		return true
	}
	if a.Kind != b.Kind || a.Scope != b.Scope || a.KeyBy != b.KeyBy || a.Overload != b.Overload ||
		(b.Mode == wire.ModeEnforce && a.Mode != wire.ModeEnforce) {
		return true
	}
	up := func(x, y float64) bool { return y > x }
	return up(b.Rate, a.Rate) || up(float64(b.Burst), float64(a.Burst)) || up(float64(b.Limit), float64(a.Limit)) ||
		up(float64(a.Window), float64(b.Window)) || up(float64(b.Max), float64(a.Max)) || up(float64(b.Min), float64(a.Min)) ||
		up(float64(b.MaxWait), float64(a.MaxWait)) || up(b.ErrorRate, a.ErrorRate) || up(b.SlowCallRate, a.SlowCallRate) ||
		up(float64(b.SlowCallDuration), float64(a.SlowCallDuration)) || up(float64(b.MinRequests), float64(a.MinRequests)) ||
		up(float64(a.OpenDuration), float64(b.OpenDuration)) || up(float64(a.MaxOpenDuration), float64(b.MaxOpenDuration)) ||
		up(float64(b.HalfOpenProbes), float64(a.HalfOpenProbes))
}

// GetPolicy returns app's approval policy (the zero policy, unprotected,
// when none was set).
func (s *Service) GetPolicy(ctx context.Context, app string) (*AppPolicy, error) {
	row := AppPolicy{App: app, Approvals: 1}
	if err := s.db.WithContext(ctx).Where("app = ?", app).Limit(1).Find(&row).Error; err != nil {
		return nil, unavailable(err)
	}
	return &row, nil
}

// SetPolicy sets app's approval policy; admins only, audited.
func (s *Service) SetPolicy(ctx context.Context, a Actor, app string, in PolicyInput) (*AppPolicy, error) {
	var out *AppPolicy
	_, err := s.commit(ctx, change{
		Actor: a, Action: audit.PolicyUpdate, Reason: in.Reason,
		Authorize: func(a Actor) error { return a.mayAdmin("set approval policies") },
		Apply: func(tx *gorm.DB) (string, any, any, error) {
			var v FieldErrors
			if !wire.ValidApp(app) {
				v.Add("app", "must match ^[a-z0-9][a-z0-9._-]{0,62}$")
			}
			if in.Approvals == 0 {
				in.Approvals = 1
			}
			p := policy.Policy{Protected: in.Protected, Approvals: in.Approvals, Rules: in.Rules, NoBreakGlass: in.NoBreakGlass}
			for f, msg := range p.Validate() {
				v.Add(f, msg)
			}
			if err := v.Err(); err != nil {
				return "", nil, nil, err
			}
			cur := AppPolicy{App: app, Approvals: 1}
			if err := tx.Where("app = ?", app).Limit(1).Find(&cur).Error; err != nil {
				return "", nil, nil, err
			}
			if err := CheckVersion(in.Version, cur.Version); err != nil {
				return "", nil, nil, err
			}
			next := AppPolicy{App: app, Protected: in.Protected, Approvals: in.Approvals, NoBreakGlass: in.NoBreakGlass,
				Version: cur.Version + 1, Reason: in.Reason, UpdatedBy: a.Name, UpdatedAt: s.now()}
			if in.Rules != nil {
				b, _ := json.Marshal(in.Rules)
				r := string(b)
				next.Rules = &r
			}
			var res *gorm.DB
			if cur.Version == 0 {
				res = tx.Create(&next)
			} else {
				res = tx.Model(&AppPolicy{}).Where("app = ? AND version = ?", app, cur.Version).Select("*").Updates(&next)
			}
			if res.Error != nil {
				return "", nil, nil, res.Error
			}
			if res.RowsAffected == 0 {
				return "", nil, nil, fmt.Errorf("%w: the policy of %s changed concurrently", ErrConflict, app)
			}
			out = &next
			var before any
			if cur.Version > 0 {
				before = cur.View()
			}
			return "policy/" + app, before, next.View(), nil
		},
	})
	return out, err
}

// target names the entity as the audit log does ("switch/checkout/x").
func (k entityKey) target() string { return k.kind + "/" + k.app + "/" + k.name }
