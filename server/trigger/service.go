package trigger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/internal/oneline"
	"github.com/switchyard-io/switchyard/sdk/limit"
	"github.com/switchyard-io/switchyard/sdk/wire"
	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/finding"
	"github.com/switchyard-io/switchyard/server/signal"
)

// DefaultInterval is how often the leader evaluates every rule when
// Config.Interval is zero.
const DefaultInterval = 5 * time.Second

// Config configures the trigger service.
type Config struct {
	// Interval is the evaluation period of every rule (default
	// DefaultInterval).
	Interval time.Duration
	// Plans are the staged rollouts, for rules whose rollout is a template
	// (nil: such rules are refused).
	Plans Planner
	// Drills says which drills are running (nil: none ever are); a rule
	// reading the fleet signals of a drilled app holds meanwhile.
	Drills Drills
	Logger *slog.Logger
	// Clock is the previews' rate limit clock (nil: the system's).
	Clock limit.Clock
}

// Drills is what the trigger job needs of the drills (drill.Service is
// one): the runs whose override is in place now.
type Drills interface {
	// Running maps each app with a drill in progress to the drill run's
	// cause ("drill/checkout/reco-monthly#4").
	Running(ctx context.Context) (map[string]string, error)
}

// Planner is what a rule whose rollout is a staged-rollout template needs
// of the staged rollouts (rollout.Service is one): a template's check when
// the rule is saved; when it fires, the template's plan started; when it
// recovers, the switch's plan ended — each inside the job's transaction.
type Planner interface {
	CheckTemplate(name string) error
	StartTemplate(j *server.JobTx, a server.Actor, app, sw, template, reason string) (int64, error)
	EndPlan(j *server.JobTx, a server.Actor, app, sw, reason string) (bool, error)
	// Runs reports whether a plan a started is active on app/sw.
	Runs(j *server.JobTx, a server.Actor, app, sw string) (bool, error)
}

// Service keeps the rules and their state: every change a person makes
// (create, update, delete, pause, resume, confirm) is an audited change
// through the console's change path; the leader's job (Job) evaluates them.
type Service struct {
	core     *server.Service
	sources  signal.Sources
	interval time.Duration
	plans    Planner
	drills   Drills
	log      *slog.Logger
	wake     chan struct{}
	previews *limit.Keyed // per actor
}

// Preview limits, per actor.
const (
	PreviewsPerMinute = 10
	PreviewBurst      = 10
)

// newPreviewLimit is the token bucket of previews, keyed by actor.
func newPreviewLimit(clock limit.Clock) *limit.Keyed {
	k, err := limit.NewKeyed(&wire.LimitRule{
		App: "switchyard-console", Resource: "trigger-preview", Kind: wire.KindTokenBucket,
		Mode: wire.ModeEnforce, Scope: wire.ScopeInstance, Rate: PreviewsPerMinute / 60.0, Burst: PreviewBurst,
		KeyBy: wire.KeyBy{Source: "context", MaxKeys: 10_000, TTL: wire.Duration(30 * time.Minute)},
	}, clock)
	if err != nil {
		panic("trigger: preview limit rule: " + err.Error()) // a constant rule; cannot fail
	}
	return k
}

// New returns the trigger service on the console's service and metric
// sources.
func New(core *server.Service, sources signal.Sources, cfg Config) *Service {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Service{core: core, sources: sources, interval: cfg.Interval, plans: cfg.Plans, drills: cfg.Drills, log: cfg.Logger, wake: make(chan struct{}, 1),
		previews: newPreviewLimit(cfg.Clock)}
}

// Interval is the evaluation period.
func (s *Service) Interval() time.Duration { return s.interval }

// SourceNames lists the metric sources rules may use here: the fleet, and
// Prometheus when one is configured.
func (s *Service) SourceNames() []string {
	var out []string
	for _, name := range []string{signal.SourceFleet, signal.SourcePrometheus} {
		if _, err := s.sources.For(name, "x"); err == nil {
			out = append(out, name)
		}
	}
	return out
}

func (s *Service) db(ctx context.Context) *gorm.DB { return s.core.DB().WithContext(ctx) }

// unavailable marks a failed read as the database's.
func unavailable(err error) error {
	var ve *server.ValidationError
	if err == nil || errors.Is(err, server.ErrNotFound) || errors.As(err, &ve) || errors.Is(err, context.Canceled) {
		return err
	}
	return fmt.Errorf("%w: %w", server.ErrUnavailable, err)
}

// List returns one page of the rules of app with their state, ordered by
// name, and the cursor of the next page.
func (s *Service) List(ctx context.Context, app string, pg server.Page) ([]View, string, error) {
	var rules []Rule
	if err := pg.ByName(s.db(ctx).Where("app = ?", app), "name").Find(&rules).Error; err != nil {
		return nil, "", unavailable(err)
	}
	rules, next := server.Cut(rules, pg, func(r *Rule) string { return r.Name })
	list, err := s.viewsOf(ctx, rules)
	return list, next, err
}

// ForSwitch returns the rules of switch app/name with their state.
func (s *Service) ForSwitch(ctx context.Context, app, name string) ([]View, error) {
	return s.views(ctx, s.db(ctx).Where("app = ? AND switch_name = ?", app, name).Order("name"))
}

func (s *Service) views(ctx context.Context, q *gorm.DB) ([]View, error) {
	var rules []Rule
	if err := q.Find(&rules).Error; err != nil {
		return nil, unavailable(err)
	}
	return s.viewsOf(ctx, rules)
}

// viewsOf returns rules with their state.
func (s *Service) viewsOf(ctx context.Context, rules []Rule) ([]View, error) {
	rows, err := s.states(ctx, rules)
	if err != nil {
		return nil, err
	}
	out := make([]View, 0, len(rules))
	for i := range rules {
		row := rows[rules[i].ID]
		if row == nil {
			continue // created in between
		}
		st, err := row.decode()
		if err != nil {
			return nil, err
		}
		out = append(out, rules[i].view(row, st))
	}
	return out, nil
}

// states reads the state rows of rules, by rule id.
func (s *Service) states(ctx context.Context, rules []Rule) (map[int64]*stateRow, error) {
	ids := make([]int64, len(rules))
	for i := range rules {
		ids[i] = rules[i].ID
	}
	var rows []stateRow
	if len(ids) > 0 {
		if err := s.db(ctx).Where("trigger_id IN ?", ids).Find(&rows).Error; err != nil {
			return nil, unavailable(err)
		}
	}
	out := make(map[int64]*stateRow, len(rows))
	for i := range rows {
		out[rows[i].TriggerID] = &rows[i]
	}
	return out, nil
}

// Get returns one rule with its state.
func (s *Service) Get(ctx context.Context, app, name string) (*View, error) {
	r, err := loadRule(s.db(ctx), app, name)
	if err != nil {
		return nil, unavailable(err)
	}
	row, st, err := loadState(s.db(ctx), r.ID)
	if err != nil {
		return nil, unavailable(err)
	}
	v := r.view(row, st)
	return &v, nil
}

// Evaluations returns one page of the evaluations of a rule, newest
// first, and the cursor of the next page.
func (s *Service) Evaluations(ctx context.Context, app, name string, pg server.Page) ([]Evaluation, string, error) {
	r, err := loadRule(s.db(ctx), app, name)
	if err != nil {
		return nil, "", unavailable(err)
	}
	q, err := pg.Newest(s.db(ctx).Where("trigger_id = ?", r.ID), "id")
	if err != nil {
		return nil, "", err
	}
	var rows []evaluationRow
	if err := q.Find(&rows).Error; err != nil {
		return nil, "", unavailable(err)
	}
	rows, next := server.Cut(rows, pg, func(e *evaluationRow) string { return server.IDKey(e.ID) })
	out := make([]Evaluation, len(rows))
	for i := range rows {
		out[i] = rows[i].view()
	}
	return out, next, nil
}

// check returns build's checks for app: its sources, the answer of the
// query run once before saving (tried), and the staged rollouts'
// templates.
func (s *Service) check(ctx context.Context, app string, tried probe) checks {
	return checks{query: s.queryCheck(ctx, app, tried), template: s.templateCheck}
}

// probe is a rule's query run once before it is saved.
type probe struct {
	source, query string
	// refused is the query's field error when the source refused to
	// evaluate it (several series, say); warning says it has no data now,
	// or could not be run.
	refused *server.FieldError
	warning string
}

// try runs query once on app's source before a save, outside any
// transaction. A query that does not even parse is left to the check.
func (s *Service) try(ctx context.Context, app, source, query string) probe {
	p := probe{source: strings.TrimSpace(source), query: strings.TrimSpace(query)}
	src, err := s.sources.For(p.source, app)
	if err != nil || src.Check(ctx, p.query) != nil {
		return p
	}
	w, err := signal.TryQuery(ctx, src, p.query, s.core.Now())
	var qe *signal.QueryError
	if errors.As(err, &qe) {
		p.refused = &server.FieldError{Field: "query", Msg: qe.Msg}
	}
	p.warning = w
	return p
}

// warnings are what the answer to a save says besides the rule.
func (p probe) warnings() []string {
	if p.warning == "" {
		return nil
	}
	return []string{"query: " + p.warning}
}

// templateCheck checks a rule's rollout template.
func (s *Service) templateCheck(name string) *server.FieldError {
	if s.plans == nil {
		return &server.FieldError{Field: "rollout.template", Msg: "staged rollouts are not available on this console"}
	}
	if err := s.plans.CheckTemplate(name); err != nil {
		var ve *server.ValidationError
		if errors.As(err, &ve) && len(ve.Fields) > 0 {
			return &server.FieldError{Field: "rollout.template", Msg: ve.Fields[0].Msg}
		}
		return &server.FieldError{Field: "rollout.template", Msg: err.Error()}
	}
	return nil
}

// queryCheck checks a rule's source and query against app's sources.
func (s *Service) queryCheck(ctx context.Context, app string, tried probe) func(source, query string) *server.FieldError {
	return func(source, query string) *server.FieldError {
		src, err := s.sources.For(source, app)
		if err != nil {
			return &server.FieldError{Field: "source", Msg: err.Error()}
		}
		if err := src.Check(ctx, query); err != nil {
			var qe *signal.QueryError
			if errors.As(err, &qe) {
				return &server.FieldError{Field: "query", Msg: qe.Msg}
			}
			return &server.FieldError{Field: "query", Msg: "could not be checked: " + err.Error()}
		}
		if source == tried.source && query == tried.query {
			return tried.refused
		}
		return nil
	}
}

// stamp sets the bookkeeping of a rule written by a at version v.
func stamp(r *Rule, a server.Actor, reason string, v int64, now time.Time) {
	r.Version, r.Reason, r.UpdatedBy, r.UpdatedAt = v, oneline.Clean(reason, 1000), a.Name, now
}

// Create validates and stores a new rule. It starts from the switch as it
// is: a rule created on a switch that is on holds it, and turns it off
// once the metric recovers.
func (s *Service) Create(ctx context.Context, a server.Actor, app string, in Input) (*View, error) {
	var out View
	tried := s.try(ctx, app, in.Source, in.Query)
	err := s.core.Commit(ctx, server.Audited{Actor: a, Action: audit.TriggerCreate, Reason: in.Reason, App: app,
		Pending: server.HoldAs(audit.TriggerCreate, app, in.Name, in),
		Apply: func(tx *gorm.DB) (string, any, any, error) {
			// The switch's existence is reported with the other fields.
			var v server.FieldErrors
			r, err := build(app, in, s.check(ctx, app, tried))
			v.AddErr("", err)
			sw, err := loadSwitch(tx, app, r.SwitchName)
			var ve *server.ValidationError
			if err != nil && !errors.As(err, &ve) {
				return "", nil, nil, err
			}
			v.AddErr("", err)
			if err := v.Err(); err != nil {
				return "", nil, nil, err
			}
			if _, err := loadRule(tx, app, r.Name); err == nil {
				return "", nil, nil, &server.ExistsError{Field: "name", Name: app + "/" + r.Name}
			} else if !errors.Is(err, server.ErrNotFound) {
				return "", nil, nil, err
			}
			if err := checkOneEnforcer(tx, r); err != nil {
				return "", nil, nil, err
			}
			now := s.core.Now()
			stamp(r, a, in.Reason, 1, now)
			r.CreatedAt = now
			if err := tx.Create(r).Error; err != nil {
				return "", nil, nil, err
			}
			st := Fresh(switchOn(sw), now)
			row, err := insertState(tx, r.ID, st, now)
			if err != nil {
				return "", nil, nil, err
			}
			out = r.view(row, st)
			return r.Target(), nil, r.config(), nil
		}})
	if err != nil {
		return nil, err
	}
	out.Warnings = tried.warnings()
	return &out, nil
}

// Update merges p over a rule. A running hold ends (the thresholds it was
// judged by changed); a lock or pause stays.
func (s *Service) Update(ctx context.Context, a server.Actor, app, name string, p Patch) (*View, error) {
	var (
		out   View
		tried probe
	)
	if cur, err := loadRule(s.db(ctx), app, name); err == nil {
		if in, v := merged(p, cur); v.Err() == nil {
			tried = s.try(ctx, app, in.Source, in.Query)
		}
	}
	err := s.core.Commit(ctx, server.Audited{Actor: a, Action: audit.TriggerUpdate, Reason: p.Reason, App: app,
		Pending: server.HoldAs(audit.TriggerUpdate, app, name, p),
		Apply: func(tx *gorm.DB) (string, any, any, error) {
			cur, err := loadRule(tx, app, name)
			if err != nil {
				return "", nil, nil, err
			}
			in, v := merged(p, cur)
			if in.Name != cur.Name {
				v.Addf("name", "cannot be changed; create a rule with the new name and delete this one")
			}
			if in.Switch != cur.SwitchName {
				v.Addf("switch", "cannot be changed; create a rule for the other switch")
			}
			next, err := build(app, in, s.check(ctx, app, tried))
			v.AddErr("", err)
			if err := v.Err(); err != nil {
				return "", nil, nil, err
			}
			if err := server.CheckVersion(p.Version, cur.Version); err != nil {
				return "", nil, nil, err
			}
			next.ID, next.CreatedAt = cur.ID, cur.CreatedAt
			if err := checkOneEnforcer(tx, next); err != nil {
				return "", nil, nil, err
			}
			sw, err := loadSwitch(tx, app, cur.SwitchName)
			if err != nil {
				return "", nil, nil, err
			}
			now := s.core.Now()
			stamp(next, a, p.Reason, cur.Version+1, now)
			if err := server.UpdateVersioned(tx, &Rule{}, server.Versioned{ID: cur.ID, Version: cur.Version, What: cur.Target(), Sent: p.Version}, next); err != nil {
				return "", nil, nil, err
			}
			row, st, err := loadState(tx, cur.ID)
			if err != nil {
				return "", nil, nil, err
			}
			st = st.Reconfigured(next.Mode != cur.Mode, switchOn(sw), now)
			if err := saveState(tx, row, st, nil, now); err != nil {
				return "", nil, nil, err
			}
			out = next.view(row, st)
			return next.Target(), cur.config(), next.config(), nil
		}})
	if err != nil {
		return nil, err
	}
	out.Warnings = tried.warnings()
	return &out, nil
}

// merged is the input of rule cur with the patch merged over it, and
// the patch's unknown members and wrong types.
func merged(p Patch, cur *Rule) (Input, server.FieldErrors) {
	var in Input
	v := p.Merge(cur.Input(), &in)
	return in, v
}

// Delete removes a rule, its state and its evaluations, and resolves its
// open findings. The switch stays as it is.
func (s *Service) Delete(ctx context.Context, a server.Actor, app, name string, c server.Change) error {
	return s.core.Commit(ctx, server.Audited{Actor: a, Action: audit.TriggerDelete, Reason: c.Reason, App: app,
		Apply: func(tx *gorm.DB) (string, any, any, error) {
			cur, err := loadRule(tx, app, name)
			if err != nil {
				return "", nil, nil, err
			}
			if err := server.CheckVersion(c.Version, cur.Version); err != nil {
				return "", nil, nil, err
			}
			for _, m := range []any{&evaluationRow{}, &stateRow{}} {
				if err := tx.Where("trigger_id = ?", cur.ID).Delete(m).Error; err != nil {
					return "", nil, nil, err
				}
			}
			if err := server.DeleteVersioned(tx, &Rule{}, server.Versioned{ID: cur.ID, Version: cur.Version, What: cur.Target(), Sent: c.Version}); err != nil {
				return "", nil, nil, err
			}
			if err := resolveFindings(tx, cur, "rule deleted by "+a.Name, s.core.Now()); err != nil {
				return "", nil, nil, err
			}
			return cur.Target(), cur.config(), nil, nil
		}})
}

// stateChange is an audited change of a rule's state by a person: mutate
// gets the rule, its state and its switch, and returns the next state or
// an error that aborts the change.
func (s *Service) stateChange(ctx context.Context, a server.Actor, action audit.Action, app, name string, c server.Change,
	mutate func(tx *gorm.DB, r *Rule, st State, sw *server.Switch, now time.Time) (State, error)) (*View, error) {
	var out View
	err := s.core.Commit(ctx, server.Audited{Actor: a, Action: action, Reason: c.Reason, App: app,
		Apply: func(tx *gorm.DB) (string, any, any, error) {
			r, err := loadRule(tx, app, name)
			if err != nil {
				return "", nil, nil, err
			}
			if err := server.CheckVersion(c.Version, r.Version); err != nil {
				return "", nil, nil, err
			}
			row, st, err := loadState(tx, r.ID)
			if err != nil {
				return "", nil, nil, err
			}
			sw, err := loadSwitch(tx, app, r.SwitchName)
			if err != nil {
				return "", nil, nil, err
			}
			before := r.view(row, st)
			now := s.core.Now()
			next, err := mutate(tx, r, st, sw, now)
			if err != nil {
				return "", nil, nil, err
			}
			if err := saveState(tx, row, next, nil, now); err != nil {
				return "", nil, nil, err
			}
			out = r.view(row, next)
			return r.Target(), before, out, nil
		}})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// Pause stops a rule until a person resumes it; the switch stays as it is.
func (s *Service) Pause(ctx context.Context, a server.Actor, app, name string, c server.Change) (*View, error) {
	return s.stateChange(ctx, a, audit.TriggerPause, app, name, c, func(_ *gorm.DB, r *Rule, st State, _ *server.Switch, now time.Time) (State, error) {
		if st.Paused {
			return st, server.Conflictf("%s is already paused (by %s: %s)", r.Target(), st.PausedBy, st.PauseReason)
		}
		return st.Pause(a.Name, oneline.Clean(c.Reason, 500), now), nil
	})
}

// Resume hands the switch back to a paused or locked rule, as the switch
// is now (on: the rule turns it off once the metric recovers), and
// resolves the rule's lock and hand-off findings.
func (s *Service) Resume(ctx context.Context, a server.Actor, app, name string, c server.Change) (*View, error) {
	return s.stateChange(ctx, a, audit.TriggerResume, app, name, c, func(tx *gorm.DB, r *Rule, st State, sw *server.Switch, now time.Time) (State, error) {
		if !st.Paused && st.Phase != PhaseLocked {
			return st, server.Conflictf("%s is neither paused nor locked (it is %s)", r.Target(), st.Status())
		}
		return st.Resume(switchOn(sw), now), resolveFindings(tx, r, "resumed by "+a.Name, now)
	})
}

// Confirm confirms the recovery a rule proposes (confirm_recovery): the
// leader's job turns the switch off at its next step, as the rule, saying
// who confirmed.
func (s *Service) Confirm(ctx context.Context, a server.Actor, app, name string, c server.Change) (*View, error) {
	v, err := s.stateChange(ctx, a, audit.TriggerConfirm, app, name, c, func(_ *gorm.DB, r *Rule, st State, _ *server.Switch, now time.Time) (State, error) {
		switch {
		case st.Paused:
			return st, server.Conflictf("%s is paused; resume it first", r.Target())
		case st.Phase != PhaseAwaiting:
			return st, server.Conflictf("%s proposes no recovery (it is %s)", r.Target(), st.Status())
		case st.ConfirmedBy != "":
			return st, server.Conflictf("%s's recovery was confirmed by %s already", r.Target(), st.ConfirmedBy)
		}
		st.ConfirmedBy, st.ConfirmedAt = a.Name, now
		return st, nil
	})
	if err == nil {
		s.kick()
	}
	return v, err
}

// kick asks the job for a step now (it takes effect on the leader).
func (s *Service) kick() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// resolveFindings resolves the lock and hand-off findings of rule r.
func resolveFindings(tx *gorm.DB, r *Rule, why string, now time.Time) error {
	for _, k := range []finding.Kind{finding.TriggerLocked, finding.TriggerHandoff, finding.TriggerOverridden} {
		if _, err := finding.Resolve(tx, k, r.Target(), why, now); err != nil {
			return err
		}
	}
	return nil
}
