package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/internal/oneline"
	"github.com/switchyard-io/switchyard/sdk/wire"
	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/finding"
	"github.com/switchyard-io/switchyard/server/fleet"
	"github.com/switchyard-io/switchyard/server/notify"
	"github.com/switchyard-io/switchyard/server/signal"
)

// DefaultEvery is how often the leader steps the active plans.
const DefaultEvery = time.Second

// Config wires the rollout service.
type Config struct {
	Service *server.Service
	// Fleet is the console's fleet model: convergence and first-step
	// targets come from it.
	Fleet *fleet.Model
	// Sources answer the gates' conditions.
	Sources signal.Sources
	// Every is the job's period (default DefaultEvery).
	Every time.Duration
}

// Service starts, lists and steers staged rollouts, and is their leader
// job (Job). Every change is audited through the server's change path.
type Service struct {
	svc     *server.Service
	db      *gorm.DB
	fleet   *fleet.Model
	sources signal.Sources
	every   time.Duration
	kick    chan struct{}
}

// New returns the service; register OnPersonChange on the server's
// service and add Job to the scheduler.
func New(cfg Config) *Service {
	if cfg.Every <= 0 {
		cfg.Every = DefaultEvery
	}
	return &Service{svc: cfg.Service, db: cfg.Service.DB(), fleet: cfg.Fleet, sources: cfg.Sources, every: cfg.Every, kick: make(chan struct{}, 1)}
}

// Sources are the metric sources gates may use.
func (s *Service) Sources() signal.Sources { return s.sources }

// wake asks the job for a step now (when this console leads).
func (s *Service) wake() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// Create starts a plan for a switch of app on a person's behalf: it
// validates the input, names every bad field, and refuses a second active
// plan for the switch. The plan is pending until the leader applies its
// first step (within a second).
func (s *Service) Create(ctx context.Context, a server.Actor, app string, in Input) (*View, error) {
	// The switch's existence is reported with the other fields.
	var v server.FieldErrors
	p, err := in.plan(ctx, s.sources, app)
	var ve *server.ValidationError
	if err != nil && !errors.As(err, &ve) {
		return nil, err
	}
	v.AddErr("", err)
	if wire.ValidName(in.Switch) {
		if _, err := s.svc.GetSwitch(ctx, app, in.Switch); errors.Is(err, server.ErrNotFound) {
			v.Add("switch", "there is no switch "+app+"/"+in.Switch)
		} else if err != nil {
			return nil, err
		}
	}
	if err := v.Err(); err != nil {
		return nil, err
	}
	var id int64
	err = s.svc.Commit(ctx, server.Audited{Actor: a, Action: audit.RolloutCreate, Reason: in.Reason, App: app,
		Pending: server.HoldAs(audit.RolloutCreate, app, in.Switch, in),
		Apply: func(tx *gorm.DB) (string, any, any, error) {
			sw, err := readSwitch(tx, app, in.Switch)
			if err != nil {
				return "", nil, nil, err
			}
			r, err := s.insert(tx, a, sw, p, in.Template != "")
			if err != nil {
				return "", nil, nil, err
			}
			id = r.ID
			return r.cause(), nil, r.summary(), nil
		}})
	if err != nil {
		return nil, err
	}
	s.wake()
	return s.Get(ctx, app, id)
}

// StartPlan starts plan p for switch app/sw inside another job's
// transaction j (an auto-trigger that applies a staged plan when it
// fires), as actor a; p.Reason is required. It validates p like the API
// does, refuses a second active plan for the switch, audits the start and
// returns the plan's id. The rollout job applies the first step once j
// has committed.
func (s *Service) StartPlan(j *server.JobTx, a server.Actor, app, sw string, p Plan) (id int64, err error) {
	p.normalize()
	var v server.FieldErrors
	p.validate(context.Background(), s.sources, app, &v, "", true)
	if err := v.Err(); err != nil {
		return 0, err
	}
	err = j.Commit(server.Audited{Actor: a, Action: audit.RolloutCreate, Reason: p.Reason, App: app,
		Apply: func(tx *gorm.DB) (string, any, any, error) {
			cur, err := readSwitch(tx, app, sw)
			if err != nil {
				return "", nil, nil, err
			}
			r, err := s.insert(tx, a, cur, p, false)
			if err != nil {
				return "", nil, nil, err
			}
			id = r.ID
			return r.cause(), nil, r.summary(), nil
		}})
	s.wake()
	return id, err
}

// CheckTemplate says whether name is a template that stages a turn-on
// (for a rule that starts one: trigger.Planner).
func (s *Service) CheckTemplate(name string) error {
	_, err := Template(name, DirectionOn, Gate{})
	return err
}

// StartTemplate starts the turn-on plan of template name for app/sw inside
// job transaction j, as actor a with reason (an auto-trigger firing with a
// staged rollout: trigger.Planner).
func (s *Service) StartTemplate(j *server.JobTx, a server.Actor, app, sw, name, reason string) (int64, error) {
	p, err := Template(name, DirectionOn, Gate{})
	if err != nil {
		return 0, err
	}
	p.Reason = oneline.Clean(reason, 990)
	return s.StartPlan(j, a, app, sw, p)
}

// EndPlan aborts the active plan of app/sw, if there is one and a started
// it, inside job transaction j, as actor a with reason, leaving the switch
// as the plan left it (an auto-trigger that recovers ends the plan it
// started, then turns the switch off itself: trigger.Planner). A plan
// someone else started is left alone. It reports whether a plan ended.
func (s *Service) EndPlan(j *server.JobTx, a server.Actor, app, sw, reason string) (bool, error) {
	for attempt := 0; ; attempt++ {
		ended, err := s.endPlan(j, a, app, sw, reason)
		if !errors.Is(err, errStale) {
			return ended, err
		}
		if attempt == 2 {
			return false, fmt.Errorf("%w: the switch's staged rollout changed at the same moment; retry", server.ErrConflict)
		}
	}
}

func (s *Service) endPlan(j *server.JobTx, a server.Actor, app, sw, reason string) (bool, error) {
	r, err := s.startedBy(j, a, app, sw)
	if err != nil || r == nil {
		return false, err
	}
	now := j.Now()
	before := r.summary()
	note := "ended by " + a.Name + ": " + oneline.Clean(reason, 900)
	r.progress.end(OutcomeStopped, note, now)
	r.progress.Note, r.progress.Request = note, nil
	r.end(Aborted, now)
	err = j.Commit(server.Audited{Actor: a, Action: audit.RolloutAbort, Reason: oneline.Clean(reason, 990), App: app,
		Apply: func(tx *gorm.DB) (string, any, any, error) {
			if err := save(tx, r, now); err != nil {
				return "", nil, nil, err
			}
			if err := s.announce(tx, r, before.State, a.Name, now); err != nil {
				return "", nil, nil, err
			}
			return r.cause(), before, r.summary(), nil
		}})
	return err == nil, err
}

// Runs reports whether the active plan of app/sw is one a started
// (trigger.Planner: a rule's staged rollout turns its switch on for it).
func (s *Service) Runs(j *server.JobTx, a server.Actor, app, sw string) (bool, error) {
	r, err := s.startedBy(j, a, app, sw)
	return r != nil, err
}

// startedBy returns the active plan of app/sw when a started it, nil
// otherwise. The creator is compared by actor kind, name and cause as its
// rollout.create event records them, never by display name alone: a
// person may be called "trigger" too.
func (s *Service) startedBy(j *server.JobTx, a server.Actor, app, sw string) (*run, error) {
	r, err := activeFor(j.DB(), app, sw)
	if err != nil || r == nil || r.CreatedBy != a.Name {
		return nil, err
	}
	tx := j.DB()
	evs, _, err := audit.List(tx.Statement.Context, tx, audit.Filter{Target: r.cause(), Action: audit.RolloutCreate, Limit: 1})
	if err != nil || len(evs) == 0 {
		return nil, err
	}
	if e := evs[0]; e.ActorKind != a.Kind || e.Actor != a.Name || e.Cause != a.Cause {
		return nil, nil
	}
	return r, nil
}

// readSwitch reads the switch a plan is for; a missing one is a bad
// "switch" field.
func readSwitch(tx *gorm.DB, app, name string) (*server.Switch, error) {
	var sw server.Switch
	err := tx.Where("app = ? AND name = ?", app, name).Take(&sw).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, invalid("switch", "there is no switch "+app+"/"+name)
	}
	return &sw, err
}

// insert stores a new pending plan for sw.
func (s *Service) insert(tx *gorm.DB, a server.Actor, sw *server.Switch, p Plan, template bool) (*run, error) {
	if other, err := activeFor(tx, sw.App, sw.Name); err != nil || other != nil {
		if err != nil {
			return nil, err
		}
		return nil, &server.ExistsError{Field: "switch", Name: fmt.Sprintf("%s/%s has staged rollout #%d %s; one active plan per switch", sw.App, sw.Name, other.ID, other.State)}
	}
	if err := p.checkSwitch(sw, template); err != nil {
		return nil, err
	}
	planJSON, _ := json.Marshal(p)
	before := sw.Saved()
	beforeJSON, _ := json.Marshal(before)
	progress, _ := json.Marshal(Progress{Step: -1})
	now := s.svc.Now()
	r := row{
		App: sw.App, SwitchName: sw.Name, Direction: p.Direction, State: Pending, Plan: string(planJSON),
		BeforeState: string(beforeJSON), BaseVersion: sw.Version, Progress: string(progress), Version: 1,
		CreatedBy: a.Name, Reason: strings.TrimSpace(p.Reason), CreatedAt: now, UpdatedAt: now,
	}
	if err := tx.Create(&r).Error; err != nil {
		if errors.Is(err, gorm.ErrDuplicatedKey) || strings.Contains(err.Error(), "UNIQUE constraint failed") {
			// Another plan for the switch was created at the same moment:
			// the database's unique index on active plans refused this one.
			return nil, &server.ExistsError{Field: "switch", Name: sw.App + "/" + sw.Name + " has an active staged rollout; one active plan per switch"}
		}
		return nil, err
	}
	return &run{row: r, plan: p, progress: Progress{Step: -1}, before: before}, nil
}

// Get returns plan id of app with its history and live convergence.
func (s *Service) Get(ctx context.Context, app string, id int64) (*View, error) {
	r, err := load(s.db.WithContext(ctx), app, id)
	if err != nil {
		return nil, mapErr(err)
	}
	v := r.view(s.svc.Now(), s.live(r))
	return &v, nil
}

// Filter selects plans for List.
type Filter struct {
	Switch      string // "" for all
	Active      bool   // only pending, running and paused ones
	server.Page        // by id, newest first
}

// List returns one page of the plans of app, newest first, and the
// cursor of the next page.
func (s *Service) List(ctx context.Context, app string, f Filter) ([]View, string, error) {
	q := s.db.WithContext(ctx).Where("app = ?", app)
	if f.Switch != "" {
		q = q.Where("switch_name = ?", f.Switch)
	}
	if f.Active {
		q = q.Where("state IN ?", activeStates)
	}
	q, err := f.Newest(q, "id")
	if err != nil {
		return nil, "", err
	}
	var rows []row
	if err := q.Find(&rows).Error; err != nil {
		return nil, "", mapErr(err)
	}
	rows, next := server.Cut(rows, f.Page, func(r *row) string { return server.IDKey(r.ID) })
	now := s.svc.Now()
	out := make([]View, 0, len(rows))
	for _, rw := range rows {
		r, err := decode(rw)
		if err != nil {
			return nil, "", err
		}
		out = append(out, r.view(now, s.live(r)))
	}
	return out, next, nil
}

// Active returns the active plan of switch app/name, nil when none.
func (s *Service) Active(ctx context.Context, app, name string) (*View, error) {
	r, err := activeFor(s.db.WithContext(ctx), app, name)
	if err != nil || r == nil {
		return nil, mapErr(err)
	}
	v := r.view(s.svc.Now(), s.live(r))
	return &v, nil
}

// ActionInput is a person's pause, resume, abort or advance.
type ActionInput struct {
	Reason string `json:"reason"`
	// Version is the plan version the person saw (nil: any).
	Version *int64 `json:"version"`
	// Revert (abort only) puts the switch back exactly as it was before
	// the plan; without it the switch stays as the plan left it.
	Revert bool `json:"revert"`
}

// Pause stops a pending or running plan where it is.
func (s *Service) Pause(ctx context.Context, a server.Actor, app string, id int64, in ActionInput) (*View, error) {
	return s.act(ctx, a, app, id, in, audit.RolloutPause, func(r *run, now time.Time) error {
		if r.State != Pending && r.State != Running {
			return notNow(r, "pause", "only a pending or running plan pauses")
		}
		r.State, r.progress.Note, r.progress.Request = Paused, "paused by "+a.Name+": "+strings.TrimSpace(in.Reason), nil
		return nil
	})
}

// Resume continues a paused plan: the current step is applied again (the
// switch may have changed meanwhile) and its gate starts over —
// convergence, then the whole hold.
func (s *Service) Resume(ctx context.Context, a server.Actor, app string, id int64, in ActionInput) (*View, error) {
	return s.act(ctx, a, app, id, in, audit.RolloutResume, func(r *run, now time.Time) error {
		if r.State != Paused {
			return notNow(r, "resume", "only a paused plan resumes")
		}
		r.State, r.progress.Note = Running, ""
		r.progress.Request = &Request{Kind: RequestReapply, By: a.Name, Reason: strings.TrimSpace(in.Reason), At: now}
		return nil
	})
}

// Abort ends an active plan. The switch stays as the plan left it, or,
// with Revert, the leader puts it back exactly as it was before the plan.
func (s *Service) Abort(ctx context.Context, a server.Actor, app string, id int64, in ActionInput) (*View, error) {
	return s.act(ctx, a, app, id, in, audit.RolloutAbort, func(r *run, now time.Time) error {
		if !Active(r.State) {
			return notNow(r, "abort", "the plan has ended")
		}
		if in.Revert && r.progress.Step >= 0 {
			r.progress.Request = &Request{Kind: RequestRevert, By: a.Name, Reason: strings.TrimSpace(in.Reason), At: now}
			r.progress.Note = "reverting: requested by " + a.Name
			return nil
		}
		r.progress.end(OutcomeStopped, "aborted by "+a.Name+": "+strings.TrimSpace(in.Reason), now)
		r.progress.Note = "aborted by " + a.Name + ": " + strings.TrimSpace(in.Reason)
		r.end(Aborted, now)
		return nil
	})
}

// Advance ends the current step now, whatever its gate says, and has the
// leader apply the next one (or finish the plan).
func (s *Service) Advance(ctx context.Context, a server.Actor, app string, id int64, in ActionInput) (*View, error) {
	return s.act(ctx, a, app, id, in, audit.RolloutAdvance, func(r *run, now time.Time) error {
		if (r.State != Running && r.State != Paused) || r.progress.Step < 0 {
			return notNow(r, "advance", "only a running or paused plan past its first write advances")
		}
		r.State, r.progress.Note = Running, "advancing: requested by "+a.Name
		r.progress.Request = &Request{Kind: RequestAdvance, By: a.Name, Reason: strings.TrimSpace(in.Reason), At: now}
		return nil
	})
}

// act runs a person's action on plan id in one audited transaction.
func (s *Service) act(ctx context.Context, a server.Actor, app string, id int64, in ActionInput, action audit.Action, change func(*run, time.Time) error) (*View, error) {
	if in.Revert && action != audit.RolloutAbort {
		return nil, invalid("revert", "only an abort reverts")
	}
	err := s.svc.Commit(ctx, server.Audited{Actor: a, Action: action, Reason: in.Reason, App: app,
		Apply: func(tx *gorm.DB) (string, any, any, error) {
			// The leader records the plan's progress as it goes; without an
			// expected version, a person's action applies to the plan as it
			// is at the moment it commits.
			for attempt := 1; ; attempt++ {
				r, err := load(tx, app, id)
				if err != nil {
					return "", nil, nil, err
				}
				if err := server.CheckVersion(in.Version, r.Version); err != nil {
					return "", nil, nil, err
				}
				// A request waiting for the leader yields to a pause or a
				// plain abort; another request waits for it.
				if req := r.progress.Request; req != nil && !(action == audit.RolloutPause || (action == audit.RolloutAbort && !in.Revert)) {
					return "", nil, nil, fmt.Errorf("%w: %s's %s request is still being carried out", server.ErrConflict, req.By, req.Kind)
				}
				before := r.summary()
				now := s.svc.Now()
				if err := change(r, now); err != nil {
					return "", nil, nil, err
				}
				err = save(tx, r, now)
				if errors.Is(err, errStale) && in.Version == nil && attempt < 3 {
					continue
				}
				if errors.Is(err, errStale) {
					err = server.ChangedConcurrently(r.cause(), in.Version)
				}
				if err != nil {
					return "", nil, nil, err
				}
				if err := s.announce(tx, r, before.State, a.Name, now); err != nil {
					return "", nil, nil, err
				}
				return r.cause(), before, r.summary(), nil
			}
		}})
	if err != nil {
		return nil, mapErr(err)
	}
	s.wake()
	return s.Get(ctx, app, id)
}

// notNow is the conflict of an action the plan's state does not allow.
func notNow(r *run, what, rule string) error {
	return fmt.Errorf("%w: cannot %s staged rollout #%d: it is %s (%s)", server.ErrConflict, what, r.ID, r.State, rule)
}

// announce keeps the plan's finding and notifications in step with a
// change of its state from from, inside tx: a pause opens a
// rollout_paused finding and notifies; running again or ending resolves
// the finding; finishing and reverting notify.
func (s *Service) announce(tx *gorm.DB, r *run, from, by string, now time.Time) error {
	if r.State == from {
		return nil
	}
	title := fmt.Sprintf("Staged rollout #%d of %s/%s", r.ID, r.App, r.SwitchName)
	data := map[string]any{"rollout": r.ID, "switch": r.App + "/" + r.SwitchName, "state": r.State, "step": r.progress.Step + 1, "of": len(r.plan.Steps)}
	key := fmt.Sprintf("%s/%s@%d", r.cause(), r.State, r.Version)
	event := func(kind notify.Kind, what string) error {
		return notify.Enqueue(tx, notify.Event{Key: key, Kind: kind, App: r.App, Target: r.cause(),
			Title: title + " " + what, Body: r.progress.Note, Data: data, At: now})
	}
	switch r.State {
	case Paused:
		if _, err := finding.Open(tx, finding.Spec{Kind: finding.RolloutPaused, Target: r.cause(), App: r.App, Severity: finding.Warning,
			Summary: fmt.Sprintf("%s is paused at step %d of %d", title, r.progress.Step+1, len(r.plan.Steps)), Detail: r.progress.Note}, now); err != nil {
			return err
		}
		return event(notify.RolloutPaused, "paused")
	case Running, Pending:
		_, err := finding.Resolve(tx, finding.RolloutPaused, r.cause(), "resumed by "+by, now)
		return err
	}
	if _, err := finding.Resolve(tx, finding.RolloutPaused, r.cause(), r.State+" ("+by+")", now); err != nil {
		return err
	}
	switch r.State {
	case Done:
		return event(notify.RolloutDone, "is done")
	case Reverted:
		return event(notify.RolloutReverted, "was reverted")
	}
	return nil
}

// OnPersonChange pauses the active plan of a switch a person just changed,
// inside the person's transaction (register it with
// server.Service.OnPersonChange): people win. The pause is audited by the
// plan, with a reason naming the person, opens a rollout_paused finding
// and notifies. A deleted switch ends its plan. A renewal or a
// metadata-only edit pauses nothing (the plan adopts the switch's new
// version at its next step, see observe).
func (s *Service) OnPersonChange(j *server.JobTx, c server.PersonChange) error {
	if !c.Behaviour {
		return nil
	}
	for attempt := 0; ; attempt++ {
		err := s.personChanged(j, c)
		if !errors.Is(err, errStale) || attempt == 2 {
			if errors.Is(err, errStale) {
				return fmt.Errorf("%w: the switch's staged rollout changed at the same moment; retry", server.ErrConflict)
			}
			return err
		}
	}
}

func (s *Service) personChanged(j *server.JobTx, c server.PersonChange) error {
	r, err := activeFor(j.DB(), c.App, c.Name)
	if err != nil || r == nil {
		return err
	}
	now := j.Now()
	who := fmt.Sprintf("%s (%s) made %s", c.Actor.Name, c.Actor.Kind, c.Action)
	before := r.summary()
	action, reason := audit.RolloutPause, who+" on the switch during the plan: paused, people win; resume to apply the step again"
	switch {
	case c.Action == audit.SwitchDelete:
		action, reason = audit.RolloutAbort, who+": the plan ends with its switch"
		r.progress.end(OutcomeStopped, reason, now)
		r.end(Aborted, now)
	case r.State == Paused && r.progress.Request == nil:
		return nil // already stopped; the person's change stands
	default:
		r.State = Paused
		r.progress.Request = nil // a pending request yields to the person's change
	}
	r.progress.Note = reason
	return j.Commit(server.Audited{Actor: server.JobActor(audit.ActorRollout, r.cause()), Action: action, Reason: oneline.Clean(reason, 990), App: r.App,
		Apply: func(tx *gorm.DB) (string, any, any, error) {
			if err := save(tx, r, now); err != nil {
				return "", nil, nil, err
			}
			if err := s.announce(tx, r, before.State, c.Actor.Name, now); err != nil {
				return "", nil, nil, err
			}
			return r.cause(), before, r.summary(), nil
		}})
}

// live is the current step's convergence as the fleet model sees it now;
// nil before the first step and after the last.
func (s *Service) live(r *run) *Live {
	cur := r.progress.current()
	if cur == nil || !Active(r.State) {
		return nil
	}
	v := s.fleet.Switch(r.App, r.SwitchName)
	l := &Live{Synced: s.fleet.Synced(), Override: v.Override, Revision: v.Revision,
		Published: !v.Override && v.Value != nil && v.Value.Version == cur.Version}
	if !l.Published {
		return l
	}
	prevOff, prev, _ := previous(r.progress, cur.Index, r.before)
	match := touched(r.App, r.SwitchName, *cur, prevOff, prev)
	applied := map[string]bool{}
	for _, in := range v.Instances {
		applied[in.ID] = in.Applied
	}
	l.Applied, l.Targeted = s.fleet.AppliedBy(r.App, v.Revision, func(m fleet.Member) bool {
		if !match(m) {
			return false
		}
		l.Instances = append(l.Instances, LiveInstance{ID: m.ID, Applied: applied[m.ID]})
		return true
	})
	sort.Slice(l.Instances, func(i, j int) bool { return l.Instances[i].ID < l.Instances[j].ID })
	l.Needed = Needed(r.plan.Steps[cur.Index].Gate.MinApplied, l.Targeted)
	return l
}

// members returns the live instances that evaluate app's switches, sorted
// by id.
func (s *Service) members(app string) []fleet.Member {
	var out []fleet.Member
	// AppliedBy visits every live instance of app (for _global, of every
	// app) with its labels; the filter only collects them.
	s.fleet.AppliedBy(app, 0, func(m fleet.Member) bool { out = append(out, m); return false })
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// StepPreview is what one step of a plan would target if it were applied
// now.
type StepPreview struct {
	Target    string   `json:"target"`
	Raised    string   `json:"raised,omitempty"`
	Hold      string   `json:"hold,omitempty"`
	Instances []string `json:"instances"`
	Live      int      `json:"live"`
}

// Preview says, for a template or steps of input, which live instances
// each step would reach now — the first step's raise included — so a
// person sees who is in before starting.
func (s *Service) Preview(ctx context.Context, app string, in Input) ([]StepPreview, error) {
	p, err := in.plan(ctx, s.sources, app)
	if err != nil {
		return nil, err
	}
	sw, err := s.svc.GetSwitch(ctx, app, in.Switch)
	if err != nil {
		return nil, err
	}
	if err := p.checkSwitch(sw, in.Template != ""); err != nil {
		return nil, err
	}
	members := s.members(app)
	var out []StepPreview
	var prev *StepRecord
	cur := sw.Rollout()
	for k := range p.Steps {
		r, off, raised := Target(p, k, app, sw.Name, cur, prev, members)
		in := Includes(app, sw.Name, off, r)
		sp := StepPreview{Target: Describe(r, off), Raised: raised, Live: len(members), Instances: []string{}}
		if h := p.Steps[k].Hold.D(); h > 0 {
			sp.Hold = server.ShortDuration(h)
		}
		for _, m := range members {
			if in(m) {
				sp.Instances = append(sp.Instances, m.ID)
			}
		}
		sp.Instances = listed(sp.Instances)
		out = append(out, sp)
		prev = &StepRecord{Index: k, Rollout: r, Off: off}
		cur = r
	}
	return out, nil
}

// mapErr turns the package's own errors into the server's typed ones.
func mapErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errStale):
		return fmt.Errorf("%w: the plan changed meanwhile; read it again", server.ErrConflict)
	}
	var ve *server.ValidationError
	if errors.As(err, &ve) || errors.Is(err, server.ErrNotFound) || errors.Is(err, server.ErrConflict) ||
		errors.Is(err, server.ErrForbidden) || errors.Is(err, server.ErrAlreadyExists) || errors.Is(err, server.ErrUnavailable) ||
		errors.Is(err, context.Canceled) {
		return err
	}
	return fmt.Errorf("%w: %w", server.ErrUnavailable, err)
}

// stepReason is the audit reason of step k's change.
func stepReason(r *run, k int, target wire.Rollout, off bool, raised, why string) string {
	s := fmt.Sprintf("staged rollout #%d, step %d of %d: %s", r.ID, k+1, len(r.plan.Steps), Describe(target, off))
	if raised != "" {
		s += " (" + raised + ")"
	}
	if why != "" {
		s += "; " + why
	}
	return oneline.Clean(s, 990)
}
