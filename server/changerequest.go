package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/sdk/wire"
)

// Change request states.
const (
	RequestPending  = "pending"
	RequestApproved = "approved"
	RequestDenied   = "denied"
	RequestApplied  = "applied"
	RequestExpired  = "expired"
)

// DefaultRequestTTL is how long a change request may wait to be applied.
const DefaultRequestTTL = time.Hour

// Pending is a held change, stored exactly so that applying it later does
// what its author asked and nothing else: the kind, the target and the
// body of the call (with the target's version when it was held).
type Pending struct {
	// Kind is switch.on, switch.off, switch.update, switch.delete,
	// limit.update, limit.on, limit.off or limit.delete.
	Kind   string       `json:"kind"`
	App    string       `json:"app"`
	Name   string       `json:"name"`
	Toggle *Toggle      `json:"toggle,omitempty"`
	Switch *SwitchPatch `json:"switch,omitempty"`
	Limit  *LimitPatch  `json:"limit,omitempty"`
	Change *Change      `json:"change,omitempty"`
	// Body is the request body of a job domain's change (an auto-trigger
	// or a drill created or changed), applied by the function registered
	// for its kind (OnApplyPending).
	Body json.RawMessage `json:"body,omitempty"`
}

// HoldAs describes a job domain's change of app's entity name as a
// change request would store it: kind is its audit action
// ("trigger.create"), body the call's body as JSON.
func HoldAs(kind audit.Action, app, name string, body any) *Pending {
	b, err := json.Marshal(body)
	if err != nil {
		return nil
	}
	return &Pending{Kind: string(kind), App: app, Name: name, Body: b}
}

// OnApplyPending registers how an approved request of kind (a job
// domain's, see HoldAs) is applied: fn makes the change again as a,
// through the domain's service. Register before serving.
func (s *Service) OnApplyPending(kind audit.Action, fn func(ctx context.Context, a Actor, p Pending) error) {
	if s.appliers == nil {
		s.appliers = map[string]func(context.Context, Actor, Pending) error{}
	}
	s.appliers[string(kind)] = fn
}

// version returns where the body keeps its expected version.
func (p *Pending) version() **int64 {
	switch {
	case p.Toggle != nil:
		return &p.Toggle.Version
	case p.Switch != nil:
		return &p.Switch.Version
	case p.Limit != nil:
		return &p.Limit.Version
	case p.Change != nil:
		return &p.Change.Version
	}
	return nil
}

func (p *Pending) reason() string {
	switch {
	case p.Toggle != nil:
		return p.Toggle.Reason
	case p.Switch != nil:
		return p.Switch.Reason
	case p.Limit != nil:
		return p.Limit.Reason
	case p.Change != nil:
		return p.Change.Reason
	}
	return ""
}

// validate checks that the body fits the kind.
func (p *Pending) validate() error {
	var v FieldErrors
	want := map[string]bool{
		"switch.on": p.Toggle != nil, "switch.off": p.Toggle != nil, "switch.update": p.Switch != nil,
		"switch.delete": p.Change != nil, "limit.update": p.Limit != nil, "limit.on": p.Toggle != nil,
		"limit.off": p.Toggle != nil, "limit.delete": p.Change != nil,
	}
	ok, known := want[p.Kind]
	switch {
	case p.Body != nil:
		// A job domain's change: its service validates the body.
	case !known:
		v.Add("kind", "must be one of switch.on, switch.off, switch.update, switch.delete, limit.update, limit.on, limit.off, limit.delete")
	case !ok:
		v.Add("body", "does not fit kind "+p.Kind)
	}
	if !wire.ValidApp(p.App) {
		v.Add("app", "must match ^[a-z0-9][a-z0-9._-]{0,62}$")
	}
	return v.Err()
}

func (p *Pending) target() string {
	entity, _, _ := strings.Cut(p.Kind, ".")
	return entity + "/" + p.App + "/" + p.Name
}

// hash is the content hash approvals bind to.
func (p *Pending) hash() (string, string) {
	b, _ := json.Marshal(p)
	sum := sha256.Sum256(b)
	return string(b), hex.EncodeToString(sum[:])
}

// ChangeRequest is a held change waiting for approval, as stored.
type ChangeRequest struct {
	ID              int64      `gorm:"primaryKey" json:"id"`
	App             string     `json:"app"`
	Name            string     `json:"name"`
	Kind            string     `json:"kind"`
	Body            string     `json:"-"`
	ContentHash     string     `json:"content_hash"`
	Rule            string     `json:"rule"`
	ApprovalsNeeded int        `json:"approvals_needed"`
	State           string     `json:"state"`
	Author          string     `json:"author"`
	Reason          string     `json:"reason"`
	CreatedAt       time.Time  `json:"created_at"`
	UpdatedAt       time.Time  `json:"updated_at"`
	ExpiresAt       time.Time  `json:"expires_at"`
	DecidedBy       string     `json:"decided_by,omitempty"`
	DecisionReason  string     `json:"decision_reason,omitempty"`
	DecidedAt       *time.Time `json:"decided_at,omitempty"`
	AppliedBy       string     `json:"applied_by,omitempty"`
	AppliedAt       *time.Time `json:"applied_at,omitempty"`
	BreakGlass      bool       `json:"break_glass"`
}

// TableName pins the table name.
func (ChangeRequest) TableName() string { return "change_requests" }

// Target is how the audit log names the request.
func (r *ChangeRequest) Target() string { return fmt.Sprintf("request/%d", r.ID) }

// Pending decodes the stored change.
func (r *ChangeRequest) Pending() (Pending, error) {
	var p Pending
	err := json.Unmarshal([]byte(r.Body), &p)
	return p, err
}

// Open reports whether the request may still be approved or applied at
// now.
func (r *ChangeRequest) Open(now time.Time) bool {
	return (r.State == RequestPending || r.State == RequestApproved) && now.Before(r.ExpiresAt)
}

// auditView is the request as the audit log records it: the stored change
// included.
func (r *ChangeRequest) auditView() RequestView {
	return RequestView{ChangeRequest: *r, Change: json.RawMessage(r.Body)}
}

// Approval is one person's approval of one content of a request.
type Approval struct {
	ID          int64     `gorm:"primaryKey" json:"-"`
	RequestID   int64     `json:"-"`
	Approver    string    `json:"approver"`
	ContentHash string    `json:"content_hash"`
	Reason      string    `json:"reason"`
	CreatedAt   time.Time `json:"at"`
}

// TableName pins the table name.
func (Approval) TableName() string { return "change_approvals" }

// RequestView is the API representation of a request: the stored change,
// the approvals of its current content and the state at the time asked.
type RequestView struct {
	ChangeRequest
	Change    json.RawMessage `json:"change"`
	Approvals []Approval      `json:"approvals"`
}

// ApprovalEvent is something people should hear about a held change
// (OnApproval): a request made, edited, approved, denied or applied, or a
// break-glass.
type ApprovalEvent struct {
	Kind    string
	Actor   Actor
	App     string
	Target  string // the switch or rule ("switch/checkout/recommend")
	Rule    string
	Reason  string
	Request *ChangeRequest // nil for a direct break-glass
	At      time.Time
}

// Approval event kinds.
const (
	EventRequested  = "requested"
	EventUpdated    = "updated"
	EventApproved   = "approved"
	EventDenied     = "denied"
	EventApplied    = "applied"
	EventBreakGlass = "break_glass"
)

// OnApproval registers fn to run inside the transaction of every
// approval event, so notifications and the break-glass review exist
// exactly when their cause committed. Register before serving.
func (s *Service) OnApproval(fn func(tx *gorm.DB, e ApprovalEvent) error) {
	s.approvalHooks = append(s.approvalHooks, fn)
}

func (s *Service) tellApproval(tx *gorm.DB, e ApprovalEvent) error {
	for _, fn := range s.approvalHooks {
		if err := fn(tx, e); err != nil {
			return err
		}
	}
	return nil
}

// hold turns a change the policy held into a change request of its
// author, in its own transaction.
func (s *Service) hold(ctx context.Context, c change, held *ApprovalRequired) error {
	p := *c.Pending
	if v := p.version(); v != nil && *v == nil && held.version > 0 {
		ver := held.version
		*v = &ver
	}
	body, hash := p.hash()
	now := s.now()
	r := &ChangeRequest{
		App: p.App, Name: p.Name, Kind: p.Kind, Body: body, ContentHash: hash, Rule: string(held.Decision.Rule),
		ApprovalsNeeded: held.Decision.Approvals, State: RequestPending, Author: c.Actor.Name, Reason: strings.TrimSpace(c.Reason),
		CreatedAt: now, UpdatedAt: now, ExpiresAt: now.Add(s.requestTTL),
	}
	_, err := s.commit(ctx, change{
		Actor: c.Actor, Action: audit.RequestCreate, Reason: c.Reason,
		Authorize: func(a Actor) error { return a.mayWrite(p.App) },
		Apply: func(tx *gorm.DB) (string, any, any, error) {
			if err := tx.Create(r).Error; err != nil {
				return "", nil, nil, err
			}
			return r.Target(), nil, r.auditView(), s.tellApproval(tx, ApprovalEvent{
				Kind: EventRequested, Actor: c.Actor, App: p.App, Target: p.target(), Rule: r.Rule, Reason: r.Reason, Request: r, At: now,
			})
		},
	})
	if err != nil {
		return err
	}
	held.Request = r
	return nil
}

// RequestFilter selects requests; zero fields match all.
type RequestFilter struct {
	App, Name, State string
	// Open selects the requests still waiting (pending or approved).
	Open bool
}

// ListRequests returns one page of the requests f selects, newest first,
// and the cursor of the next page ("" on the last).
func (s *Service) ListRequests(ctx context.Context, f RequestFilter, pg Page) ([]ChangeRequest, string, error) {
	q, err := pg.Newest(s.db.WithContext(ctx), "id")
	if err != nil {
		return nil, "", err
	}
	if f.App != "" {
		q = q.Where("app = ?", f.App)
	}
	if f.Name != "" {
		q = q.Where("name = ?", f.Name)
	}
	if f.State != "" {
		q = q.Where("state = ?", f.State)
	}
	if f.Open {
		q = q.Where("state IN ? AND expires_at > ?", []string{RequestPending, RequestApproved}, s.now())
	}
	var out []ChangeRequest
	if err := q.Find(&out).Error; err != nil {
		return nil, "", unavailable(err)
	}
	out, next := Cut(out, pg, func(r *ChangeRequest) string { return IDKey(r.ID) })
	return out, next, nil
}

// GetRequest returns one request with the approvals of its current
// content.
func (s *Service) GetRequest(ctx context.Context, id int64) (*RequestView, error) {
	return s.requestView(s.db.WithContext(ctx), id)
}

func (s *Service) requestView(tx *gorm.DB, id int64) (*RequestView, error) {
	r, err := loadRequest(tx, id)
	if err != nil {
		return nil, mapDBError(err)
	}
	var as []Approval
	if err := tx.Where("request_id = ? AND content_hash = ?", id, r.ContentHash).Order("id").Find(&as).Error; err != nil {
		return nil, unavailable(err)
	}
	if r.State != RequestApplied && r.State != RequestDenied && !s.now().Before(r.ExpiresAt) {
		r.State = RequestExpired
	}
	return &RequestView{ChangeRequest: *r, Change: json.RawMessage(r.Body), Approvals: as}, nil
}

func loadRequest(tx *gorm.DB, id int64) (*ChangeRequest, error) {
	var r ChangeRequest
	if err := tx.Where("id = ?", id).Take(&r).Error; err != nil {
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return nil, fmt.Errorf("%w: change request %d", ErrNotFound, id)
		}
		return nil, err
	}
	return &r, nil
}

// Decision is an approval or a denial of a request.
type Decision struct {
	Reason string `json:"reason"`
}

// decide runs an audited decision on request id: the actor must be a
// person allowed to change the request's app; fn checks and writes.
func (s *Service) decide(ctx context.Context, a Actor, id int64, action audit.Action, reason string, fn func(tx *gorm.DB, r *ChangeRequest) (ApprovalEvent, error)) (*RequestView, error) {
	var out *RequestView
	_, err := s.commit(ctx, change{
		Actor: a, Action: action, Reason: reason,
		Authorize: func(a Actor) error {
			if !a.Person() {
				return fmt.Errorf("%w: only people decide change requests", ErrForbidden)
			}
			return nil
		},
		Apply: func(tx *gorm.DB) (string, any, any, error) {
			r, err := loadRequest(tx, id)
			if err != nil {
				return "", nil, nil, err
			}
			if err := a.mayWrite(r.App); err != nil {
				return "", nil, nil, err
			}
			if !r.Open(s.now()) {
				return "", nil, nil, Conflictf("request %d is %s", id, s.stateAt(r))
			}
			before := *r
			ev, err := fn(tx, r)
			if err != nil {
				return "", nil, nil, err
			}
			ev.Actor, ev.App, ev.Request, ev.At, ev.Reason = a, r.App, r, s.now(), strings.TrimSpace(reason)
			p, _ := r.Pending()
			ev.Target, ev.Rule = p.target(), r.Rule
			if err := s.tellApproval(tx, ev); err != nil {
				return "", nil, nil, err
			}
			if out, err = s.requestView(tx, id); err != nil {
				return "", nil, nil, err
			}
			return r.Target(), before.auditView(), r.auditView(), nil
		},
	})
	return out, err
}

func (s *Service) stateAt(r *ChangeRequest) string {
	if (r.State == RequestPending || r.State == RequestApproved) && !s.now().Before(r.ExpiresAt) {
		return "expired since " + r.ExpiresAt.UTC().Format(time.RFC3339)
	}
	return r.State
}

// ApproveRequest records a's approval of the request's current content.
// The author cannot approve their own request (admins included) unless
// self-approval is allowed; the request is approved once it has the
// approvals it needs.
func (s *Service) ApproveRequest(ctx context.Context, a Actor, id int64, d Decision) (*RequestView, error) {
	return s.decide(ctx, a, id, audit.RequestApprove, d.Reason, func(tx *gorm.DB, r *ChangeRequest) (ApprovalEvent, error) {
		if r.Author == a.Name && !s.selfApproval {
			return ApprovalEvent{}, fmt.Errorf("%w: you made request %d; another person must approve it", ErrForbidden, r.ID)
		}
		now := s.now()
		ap := &Approval{RequestID: r.ID, Approver: a.Name, ContentHash: r.ContentHash, Reason: strings.TrimSpace(d.Reason), CreatedAt: now}
		if err := tx.Create(ap).Error; err != nil {
			if errors.Is(mapDBError(err), ErrAlreadyExists) {
				return ApprovalEvent{}, Conflictf("you already approved request %d", r.ID)
			}
			return ApprovalEvent{}, err
		}
		var n int64
		if err := tx.Model(&Approval{}).Where("request_id = ? AND content_hash = ?", r.ID, r.ContentHash).Count(&n).Error; err != nil {
			return ApprovalEvent{}, err
		}
		state := RequestPending
		if int(n) >= r.ApprovalsNeeded {
			state = RequestApproved
		}
		if err := s.setRequest(tx, r, map[string]any{"state": state, "updated_at": now}); err != nil {
			return ApprovalEvent{}, err
		}
		r.State, r.UpdatedAt = state, now
		return ApprovalEvent{Kind: EventApproved}, nil
	})
}

// DenyRequest denies the request; it can no longer be applied.
func (s *Service) DenyRequest(ctx context.Context, a Actor, id int64, d Decision) (*RequestView, error) {
	return s.decide(ctx, a, id, audit.RequestDeny, d.Reason, func(tx *gorm.DB, r *ChangeRequest) (ApprovalEvent, error) {
		now := s.now()
		if err := s.setRequest(tx, r, map[string]any{"state": RequestDenied, "decided_by": a.Name, "decision_reason": strings.TrimSpace(d.Reason), "decided_at": now, "updated_at": now}); err != nil {
			return ApprovalEvent{}, err
		}
		r.State, r.DecidedBy, r.DecisionReason, r.DecidedAt, r.UpdatedAt = RequestDenied, a.Name, strings.TrimSpace(d.Reason), &now, now
		return ApprovalEvent{Kind: EventDenied}, nil
	})
}

// RequestEdit replaces the body of a request (its kind and target stay).
type RequestEdit struct {
	Toggle *Toggle      `json:"toggle"`
	Switch *SwitchPatch `json:"switch"`
	Limit  *LimitPatch  `json:"limit"`
	Change *Change      `json:"change"`
	Reason string       `json:"reason"`
}

// UpdateRequest lets the author change what the request would do. The
// content hash changes, so every approval given so far no longer counts
// and the request is pending again.
func (s *Service) UpdateRequest(ctx context.Context, a Actor, id int64, e RequestEdit) (*RequestView, error) {
	return s.decide(ctx, a, id, audit.RequestUpdate, e.Reason, func(tx *gorm.DB, r *ChangeRequest) (ApprovalEvent, error) {
		if r.Author != a.Name {
			return ApprovalEvent{}, fmt.Errorf("%w: only the author of request %d edits it", ErrForbidden, r.ID)
		}
		p, err := r.Pending()
		if err != nil {
			return ApprovalEvent{}, err
		}
		if p.Body != nil {
			return ApprovalEvent{}, invalid("kind", "a request of kind "+p.Kind+" cannot be edited; deny it and send the changed call again")
		}
		p.Toggle, p.Switch, p.Limit, p.Change = e.Toggle, e.Switch, e.Limit, e.Change
		if err := p.validate(); err != nil {
			return ApprovalEvent{}, err
		}
		body, hash := p.hash()
		now := s.now()
		if err := s.setRequest(tx, r, map[string]any{"body": body, "content_hash": hash, "state": RequestPending, "reason": strings.TrimSpace(p.reason()), "updated_at": now}); err != nil {
			return ApprovalEvent{}, err
		}
		r.Body, r.ContentHash, r.State, r.Reason, r.UpdatedAt = body, hash, RequestPending, strings.TrimSpace(p.reason()), now
		return ApprovalEvent{Kind: EventUpdated}, nil
	})
}

// setRequest writes fields of r guarded by its state and content, so a
// decision that raced another one fails.
func (s *Service) setRequest(tx *gorm.DB, r *ChangeRequest, fields map[string]any) error {
	res := tx.Model(&ChangeRequest{}).Where("id = ? AND state = ? AND content_hash = ?", r.ID, r.State, r.ContentHash).Updates(fields)
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 0 {
		return Conflictf("request %d changed meanwhile; reload it", r.ID)
	}
	return nil
}

// ApplyRequest applies an approved request as a: the policy and the
// target's version are checked again (a stale version is ErrConflict and
// nothing is applied), and exactly one of several concurrent applies
// wins. With breakGlass a pending request applies at once; reason is
// then mandatory and the change is marked, announced and reviewed.
func (s *Service) ApplyRequest(ctx context.Context, a Actor, id int64, breakGlass bool, reason string) (*RequestView, Receipt, error) {
	if !a.Person() {
		return nil, Receipt{}, fmt.Errorf("%w: only people apply change requests", ErrForbidden)
	}
	if breakGlass {
		if err := validateReason(reason); err != nil {
			return nil, Receipt{}, err
		}
	}
	r, err := loadRequest(s.db.WithContext(ctx), id)
	if err != nil {
		return nil, Receipt{}, mapDBError(err)
	}
	if err := a.mayWrite(r.App); err != nil {
		return nil, Receipt{}, err
	}
	now := s.now()
	switch {
	case r.State != RequestPending && r.State != RequestApproved:
		return nil, Receipt{}, Conflictf("request %d is %s", id, r.State)
	case !now.Before(r.ExpiresAt):
		_ = s.tx(ctx, func(tx *gorm.DB) error {
			return tx.Model(&ChangeRequest{}).Where("id = ? AND state = ?", id, r.State).Updates(map[string]any{"state": RequestExpired, "updated_at": now}).Error
		})
		return nil, Receipt{}, Conflictf("request %d expired at %s; ask again", id, r.ExpiresAt.UTC().Format(time.RFC3339))
	case r.State == RequestPending && !breakGlass:
		return nil, Receipt{}, Conflictf("request %d still needs approval", id)
	}
	var n int64
	if err := s.db.WithContext(ctx).Model(&Approval{}).Where("request_id = ? AND content_hash = ?", id, r.ContentHash).Count(&n).Error; err != nil {
		return nil, Receipt{}, unavailable(err)
	}
	p, err := r.Pending()
	if err != nil {
		return nil, Receipt{}, fmt.Errorf("server: request %d: %w", id, err)
	}
	g := &grant{request: r, approvals: int(n), breakGlass: breakGlass, consume: func(tx *gorm.DB) error {
		res := tx.Model(&ChangeRequest{}).Where("id = ? AND state = ? AND content_hash = ?", id, r.State, r.ContentHash).
			Updates(map[string]any{"state": RequestApplied, "applied_by": a.Name, "applied_at": now, "updated_at": now, "break_glass": breakGlass})
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return Conflictf("request %d was applied, edited or decided meanwhile", id)
		}
		r.State, r.AppliedBy, r.AppliedAt, r.BreakGlass = RequestApplied, a.Name, &now, breakGlass
		return s.tellApproval(tx, ApprovalEvent{Kind: EventApplied, Actor: a, App: r.App, Target: p.target(), Rule: r.Rule, Reason: cmpReason(reason, r.Reason), Request: r, At: now})
	}}
	rc, err := s.applyPending(context.WithValue(ctx, grantKey{}, g), a, p, reason)
	if err != nil {
		return nil, rc, err
	}
	v, err := s.GetRequest(ctx, id)
	return v, rc, err
}

func cmpReason(a, b string) string {
	if strings.TrimSpace(a) != "" {
		return strings.TrimSpace(a)
	}
	return b
}

// applyPending makes the stored change through the ordinary change path.
// A break-glass reason, when given, is the reason of the change.
func (s *Service) applyPending(ctx context.Context, a Actor, p Pending, reason string) (Receipt, error) {
	if err := p.validate(); err != nil {
		return Receipt{}, err
	}
	if strings.TrimSpace(reason) != "" && p.Body == nil {
		switch {
		case p.Toggle != nil:
			p.Toggle.Reason = reason
		case p.Switch != nil:
			p.Switch.Reason = reason
		case p.Limit != nil:
			p.Limit.Reason = reason
		case p.Change != nil:
			p.Change.Reason = reason
		}
	}
	var rc Receipt
	var err error
	switch p.Kind {
	case "switch.on":
		_, rc, err = s.TurnOn(ctx, a, p.App, p.Name, *p.Toggle)
	case "switch.off":
		_, rc, err = s.TurnOff(ctx, a, p.App, p.Name, *p.Toggle)
	case "switch.update":
		_, rc, err = s.PatchSwitch(ctx, a, p.App, p.Name, *p.Switch)
	case "switch.delete":
		rc, err = s.DeleteSwitch(ctx, a, p.App, p.Name, *p.Change)
	case "limit.update":
		_, rc, err = s.PatchLimit(ctx, a, p.App, p.Name, *p.Limit)
	case "limit.on":
		_, rc, err = s.SetLimitState(ctx, a, p.App, p.Name, wire.StateOn, *p.Toggle)
	case "limit.off":
		_, rc, err = s.SetLimitState(ctx, a, p.App, p.Name, wire.StateOff, *p.Toggle)
	case "limit.delete":
		rc, err = s.DeleteLimit(ctx, a, p.App, p.Name, *p.Change)
	default:
		apply, ok := s.appliers[p.Kind]
		if !ok {
			return Receipt{}, fmt.Errorf("server: no way to apply a request of kind %s", p.Kind)
		}
		err = apply(ctx, a, p)
	}
	return rc, err
}

// PreviewRequest returns the target of r as it is now and as r would
// leave it (nil when absent), computed without writing anything, so a
// reviewer sees the difference. A job domain's request has no preview
// (both nil).
func (s *Service) PreviewRequest(ctx context.Context, r *ChangeRequest) (before, after any, err error) {
	p, err := r.Pending()
	if err != nil || p.validate() != nil || p.Body != nil {
		return nil, nil, err
	}
	db := s.db.WithContext(ctx)
	if strings.HasPrefix(p.Kind, "switch.") {
		sw, err := load[Switch](db, p.App, p.Name)
		if err != nil {
			return nil, nil, mapDBError(err)
		}
		next := *sw
		switch p.Kind {
		case "switch.on":
			if p.Toggle.Rollout != nil {
				if err := next.setRollout(*p.Toggle.Rollout); err != nil {
					return sw.View(), nil, err
				}
			}
			next.turnOn(s.now())
		case "switch.off":
			next.turnOff()
		case "switch.update":
			if err := p.Switch.apply(&next); err != nil {
				return sw.View(), nil, err
			}
		case "switch.delete":
			return sw.View(), nil, nil
		}
		return sw.View(), next.View(), nil
	}
	rule, err := load[LimitRule](db, p.App, p.Name)
	if err != nil {
		return nil, nil, mapDBError(err)
	}
	next := *rule
	switch p.Kind {
	case "limit.update":
		merged, err := p.Limit.merge(rule.Wire())
		if err != nil {
			return rule.View(), nil, err
		}
		next.Kind, next.Spec = merged.Kind, spec(merged)
	case "limit.on":
		next.State = wire.StateOn
	case "limit.off":
		next.State = wire.StateOff
	case "limit.delete":
		return rule.View(), nil, nil
	}
	return rule.View(), next.View(), nil
}
