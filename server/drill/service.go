package drill

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"gorm.io/gorm"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/sdk/wire"
	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/egress"
	"github.com/switchyard-io/switchyard/server/fleet"
	"github.com/switchyard-io/switchyard/server/seal"
	"github.com/switchyard-io/switchyard/server/signal"
)

// Config wires the drill service to the console.
type Config struct {
	Service   *server.Service
	Fleet     *fleet.Model
	Sources   signal.Sources
	Etcd      *clientv3.Client
	Namespace string
	// LeaseTTL is the TTL of a run's override lease (default 5s, at most
	// 10s): a console that dies mid-run leaves an override that etcd
	// deletes within it.
	LeaseTTL time.Duration
	// Keys seal the probes' header values at rest, in the drill and in
	// every run's copy of its spec (nil: stored as given).
	Keys *seal.Keyring
	// Egress guards the probes: every connection is checked where it is
	// dialled (nil: egress.Strict, no allowlist).
	Egress *egress.Guard
	// HeldRules lists the auto-trigger rules that run cause held since
	// it started (trigger.Service.HeldBy), for its report; nil: none.
	HeldRules func(ctx context.Context, cause string, since time.Time) ([]string, error)
	Logger    *slog.Logger
}

// SignalsSettle is how long after a run ends its app's fleet signals
// still show it: a rate spans the instances' last two reports.
const SignalsSettle = 30 * time.Second

// Running maps each app with a run whose override is or was in place
// within SignalsSettle to the run's cause (for trigger.Drills: rules
// reading the app's fleet signals hold meanwhile).
func (s *Service) Running(ctx context.Context) (map[string]string, error) {
	var runs []Run
	settled := s.cfg.Service.Now().Add(-SignalsSettle)
	err := s.db.WithContext(ctx).Where("started_at IS NOT NULL AND dry_run = ? AND (finished_at IS NULL OR finished_at > ?)", false, settled).
		Order("id").Find(&runs).Error
	if err != nil || len(runs) == 0 {
		return nil, err
	}
	out := make(map[string]string, len(runs))
	for i := range runs {
		out[runs[i].App] = runs[i].Cause()
	}
	return out, nil
}

// DefaultLeaseTTL is the default Config.LeaseTTL.
const DefaultLeaseTTL = 5 * time.Second

// Service keeps the drills and their runs. Any console serves its reads
// and a person's changes; the leader's Job runs the drills.
type Service struct {
	cfg    Config
	db     *gorm.DB
	prober *prober
	job    *Job
}

// New returns the drill service and registers its person-change hook on
// c.Service: a person's change to a drilled switch ends the drill (people
// win).
func New(c Config) *Service {
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	c.LeaseTTL = min(c.LeaseTTL, 10*time.Second)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Egress == nil {
		c.Egress = egress.Strict()
	}
	s := &Service{cfg: c, db: c.Service.DB(), prober: newProber(c.Egress, c.Keys)}
	s.job = &Job{s: s, wake: make(chan struct{}, 1), keepers: map[int64]*keeper{}, rounds: map[int64]*rounds{}}
	return s
}

// Job is the leader job that runs the drills.
func (s *Service) Job() *Job { return s.job }

// Input creates a drill.
type Input struct {
	Name string `json:"name"`
	Spec
	Reason string `json:"reason"`
}

// RunInput asks for a run now.
type RunInput struct {
	Reason string `json:"reason"`
	// Version is the drill's version the person saw (nil: any).
	Version *int64 `json:"version"`
	// DryRun runs the preflight and the probes against the undegraded path
	// only: nothing is degraded.
	DryRun bool `json:"dry_run"`
}

// AbortInput ends a run early.
type AbortInput struct {
	Reason string `json:"reason"`
	// Version is the drill's version the person saw (nil: any): every
	// action under a drill names the drill's version.
	Version *int64 `json:"version"`
}

// readErr maps a read's database error to the server's typed errors.
func readErr(err error, what string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, gorm.ErrRecordNotFound):
		return fmt.Errorf("%w: %s", server.ErrNotFound, what)
	case errors.Is(err, context.Canceled):
		return err
	}
	return fmt.Errorf("%w: %w", server.ErrUnavailable, err)
}

// List returns one page of the drills of app, by name, and the cursor of
// the next page.
func (s *Service) List(ctx context.Context, app string, pg server.Page) ([]Drill, string, error) {
	var out []Drill
	if err := pg.ByName(s.db.WithContext(ctx).Where("app = ?", app), "name").Find(&out).Error; err != nil {
		return nil, "", readErr(err, "drills")
	}
	out, next := server.Cut(out, pg, func(d *Drill) string { return d.Name })
	return out, next, nil
}

// ForSwitch returns the drills of one switch.
func (s *Service) ForSwitch(ctx context.Context, app, name string) ([]Drill, error) {
	var out []Drill
	err := s.db.WithContext(ctx).Where("app = ? AND switch_name = ?", app, name).Order("name").Find(&out).Error
	return out, readErr(err, "drills")
}

// Get returns one drill.
func (s *Service) Get(ctx context.Context, app, name string) (*Drill, error) {
	var d Drill
	err := s.db.WithContext(ctx).Where("app = ? AND name = ?", app, name).Take(&d).Error
	return &d, readErr(err, "drill "+app+"/"+name)
}

// validate checks a spec completely — its fields, the switch it drills,
// the queries of its abort conditions and, when probes is set, what its
// probes may reach and send — before anything is written.
func (s *Service) validate(ctx context.Context, a server.Actor, app string, sp *Spec, probes bool, v server.FieldErrors) (*plan, error) {
	if app == wire.GlobalApp {
		v.Addf("app", "drills belong to one app; _global switches are not drilled")
	}
	pl, err := sp.compile()
	var ve *server.ValidationError
	if errors.As(err, &ve) {
		v.AddErr("", err)
	}
	if wire.ValidName(sp.Switch) {
		if _, err := s.cfg.Service.GetSwitch(ctx, app, sp.Switch); errors.Is(err, server.ErrNotFound) {
			v.Addf("switch", "there is no switch %s/%s", app, sp.Switch)
		} else if err != nil {
			return nil, err
		}
	}
	for i, c := range sp.Abort.Conditions {
		f := fmt.Sprintf("abort.conditions[%d]", i)
		if c.Source != signal.SourceFleet && c.Source != signal.SourcePrometheus || strings.TrimSpace(c.Query) == "" {
			continue // already named
		}
		src, err := s.cfg.Sources.For(c.Source, app)
		if err != nil {
			v.Addf(f+".source", "%v", err)
			continue
		}
		var qe *signal.QueryError
		if err := src.Check(ctx, c.Query); errors.As(err, &qe) {
			v.Addf(f+".query", "%s", qe.Msg)
		} else if err != nil {
			return nil, fmt.Errorf("%w: %w", server.ErrUnavailable, err)
		}
	}
	for j, p := range sp.Probes {
		if probes {
			s.checkProbe(a, p, fmt.Sprintf("probes[%d]", j), &v)
		}
		for k, f := range p.RequiredFields {
			if !wire.Printable(f) || len(f) > 500 {
				v.Addf(fmt.Sprintf("probes[%d].required_fields[%d]", j, k), "must be printable and at most 500 characters")
			}
		}
	}
	if err := v.Err(); err != nil {
		return nil, err
	}
	return pl, nil
}

// checkProbe refuses, at save time, a probe whose literal host the egress
// guard refuses (a name is checked when dialled), and a probe that could
// change something — a method other than GET or HEAD, or headers of its
// own — unless an admin saves it or an admin allowlisted its host.
func (s *Service) checkProbe(a server.Actor, p Probe, f string, v *server.FieldErrors) {
	if err := s.cfg.Egress.CheckURL(p.URL); err != nil {
		v.Addf(f+".url", "%v", err)
		return
	}
	if a.Role == server.RoleAdmin || s.cfg.Egress.Allowlisted(p.URL) {
		return
	}
	if m := strings.ToUpper(p.Method); m != "" && m != http.MethodGet && m != http.MethodHead {
		v.Addf(f+".method", "%s needs an admin, or a host an admin allowlisted (--egress-allow); others probe with GET or HEAD", m)
	}
	if len(p.Headers) > 0 {
		v.Addf(f+".headers", "custom headers need an admin, or a host an admin allowlisted (--egress-allow)")
	}
}

// Create adds a drill.
func (s *Service) Create(ctx context.Context, a server.Actor, app string, in Input) (*Drill, error) {
	var v server.FieldErrors
	if !wire.ValidName(in.Name) {
		v.Addf("name", "must match ^[a-z0-9][a-z0-9._-]{0,62}$")
	}
	keepHidden(&in.Spec, Spec{}, &v) // nothing is stored yet: (hidden) and sealed-looking values are refused
	pl, err := s.validate(ctx, a, app, &in.Spec, true, v)
	if err != nil {
		return nil, err
	}
	now := s.cfg.Service.Now()
	spec, _ := json.Marshal(sealHeaders(in.Spec, s.cfg.Keys))
	d := &Drill{App: app, Name: in.Name, SwitchName: in.Switch, Spec: string(spec), Enabled: pl.enabled,
		LastScheduledAt: &now, Version: 1, Reason: strings.TrimSpace(in.Reason), UpdatedBy: a.Name, UpdatedAt: now, CreatedAt: now}
	err = s.cfg.Service.Commit(ctx, server.Audited{Actor: a, Action: audit.DrillCreate, Reason: in.Reason, App: app,
		Pending: s.heldCreate(app, in),
		Apply: func(tx *gorm.DB) (string, any, any, error) {
			var n int64
			if err := tx.Model(&Drill{}).Where("app = ? AND name = ?", app, in.Name).Count(&n).Error; err != nil {
				return "", nil, nil, err
			}
			if n > 0 {
				return "", nil, nil, &server.ExistsError{Field: "name", Name: app + "/" + in.Name}
			}
			if err := tx.Create(d).Error; err != nil {
				return "", nil, nil, err
			}
			return d.Target(), nil, d.View(now), nil
		}})
	return d, err
}

// Update changes a drill: p is an RFC 7396 merge patch over its spec
// (server.Patch); probes, an array, is replaced whole.
func (s *Service) Update(ctx context.Context, a server.Actor, app, name string, p server.Patch) (*Drill, error) {
	if p.Names("name") {
		return nil, &server.ValidationError{Fields: []*server.FieldError{{Field: "name", Msg: "cannot be changed; create a new drill"}}}
	}
	ch := server.Change{Reason: p.Reason, Version: p.Version}
	cur, err := s.Get(ctx, app, name)
	if err != nil {
		return nil, err
	}
	var sp Spec
	v := p.Merge(json.RawMessage(cur.Spec), &sp)
	probes := p.Names("probes")
	if old, err := cur.spec(); err == nil && probes {
		keepHidden(&sp, old, &v)
	}
	pl, err := s.validate(ctx, a, app, &sp, probes, v)
	if err != nil {
		return nil, err
	}
	now := s.cfg.Service.Now()
	var out *Drill
	err = s.cfg.Service.Commit(ctx, server.Audited{Actor: a, Action: audit.DrillUpdate, Reason: ch.Reason, App: app,
		Pending: s.heldUpdate(app, name, p),
		Apply: func(tx *gorm.DB) (string, any, any, error) {
			var d Drill
			if err := tx.Where("app = ? AND name = ?", app, name).Take(&d).Error; err != nil {
				return "", nil, nil, err
			}
			if err := server.CheckVersion(ch.Version, d.Version); err != nil {
				return "", nil, nil, err
			}
			before := d.View(now)
			old, _ := d.spec()
			spec, _ := json.Marshal(sealHeaders(sp, s.cfg.Keys))
			d.Spec, d.SwitchName, d.Enabled = string(spec), sp.Switch, pl.enabled
			if old.Schedule != sp.Schedule || old.Timezone != sp.Timezone || !d.Enabled {
				d.LastScheduledAt = &now // a new schedule starts from now: nothing is owed
			}
			d.Version++
			d.Reason, d.UpdatedBy, d.UpdatedAt = strings.TrimSpace(ch.Reason), a.Name, now
			err = server.UpdateVersioned(tx, &Drill{}, server.Versioned{ID: d.ID, Version: d.Version - 1, What: d.Target(), Sent: ch.Version}, map[string]any{
				"spec": d.Spec, "switch_name": d.SwitchName, "enabled": d.Enabled, "last_scheduled_at": d.LastScheduledAt,
				"version": d.Version, "reason": d.Reason, "updated_by": d.UpdatedBy, "updated_at": d.UpdatedAt,
			})
			if err != nil {
				return "", nil, nil, err
			}
			out = &d
			return d.Target(), before, d.View(now), nil
		}})
	return out, err
}

// sealHeaders returns sp with every probe header value sealed (values
// already sealed, such as those keepHidden put back, stay as they are).
func sealHeaders(sp Spec, keys *seal.Keyring) Spec {
	probes := make([]Probe, len(sp.Probes))
	for i, p := range sp.Probes {
		if len(p.Headers) > 0 {
			h := make(map[string]string, len(p.Headers))
			for k, v := range p.Headers {
				if !seal.IsSealed(v) {
					v = keys.Seal(v)
				}
				h[k] = v
			}
			p.Headers = h
		}
		probes[i] = p
	}
	sp.Probes = probes
	return sp
}

// Reseal seals the probe header values of every drill under keys' first
// key and returns how many drills it changed (runs keep no header values).
// `console secrets rotate` runs it.
func Reseal(ctx context.Context, db *gorm.DB, keys *seal.Keyring) (int, error) {
	n := 0
	for _, table := range []string{"drills"} {
		var rows []struct {
			ID   int64
			Spec string
		}
		if err := db.WithContext(ctx).Table(table).Select("id, spec").Find(&rows).Error; err != nil {
			return n, err
		}
		for _, r := range rows {
			var sp Spec
			if json.Unmarshal([]byte(r.Spec), &sp) != nil {
				continue
			}
			changed := false
			for i := range sp.Probes {
				for k, v := range sp.Probes[i].Headers {
					out, ch, err := keys.Reseal(v)
					if err != nil {
						return n, fmt.Errorf("%s %d: header %s: %w", table, r.ID, k, err)
					}
					sp.Probes[i].Headers[k], changed = out, changed || ch
				}
			}
			if !changed {
				continue
			}
			b, _ := json.Marshal(sp)
			if err := db.WithContext(ctx).Table(table).Where("id = ?", r.ID).Update("spec", string(b)).Error; err != nil {
				return n, err
			}
			n++
		}
	}
	return n, nil
}

// keepHidden puts the stored value back for every probe header a PATCH
// sends as HiddenValue (what every view shows), matching the probe by its
// place and URL: a client that edits one field and sends the rest back as
// it read them keeps the secrets it never saw.
func keepHidden(sp *Spec, old Spec, v *server.FieldErrors) {
	for i := range sp.Probes {
		p := &sp.Probes[i]
		for k, val := range p.Headers {
			if seal.IsSealed(val) {
				v.Addf(fmt.Sprintf("probes[%d].headers", i), "%q: a value may not start with %q", k, seal.Prefix)
				continue
			}
			if val != HiddenValue {
				continue
			}
			if i < len(old.Probes) && old.Probes[i].URL == p.URL {
				if stored, ok := old.Probes[i].Headers[k]; ok {
					p.Headers[k] = stored
					continue
				}
			}
			v.Addf(fmt.Sprintf("probes[%d].headers", i), "%q: %s stands for a stored value, and this probe has none for it; send the value", k, HiddenValue)
		}
	}
}

// Delete removes a drill; its runs stay as history. A drill with a run in
// progress is not deleted (abort the run first).
func (s *Service) Delete(ctx context.Context, a server.Actor, app, name string, c server.Change) error {
	now := s.cfg.Service.Now()
	return s.cfg.Service.Commit(ctx, server.Audited{Actor: a, Action: audit.DrillDelete, Reason: c.Reason, App: app,
		Apply: func(tx *gorm.DB) (string, any, any, error) {
			var d Drill
			if err := tx.Where("app = ? AND name = ?", app, name).Take(&d).Error; err != nil {
				return "", nil, nil, err
			}
			if err := server.CheckVersion(c.Version, d.Version); err != nil {
				return "", nil, nil, err
			}
			var open Run
			err := tx.Where("app = ? AND drill = ? AND finished_at IS NULL", app, name).Take(&open).Error
			if err == nil {
				return "", nil, nil, server.Conflictf("run #%d of the drill is in progress; abort it first", open.Number)
			} else if !errors.Is(err, gorm.ErrRecordNotFound) {
				return "", nil, nil, err
			}
			if err := tx.Delete(&d).Error; err != nil {
				return "", nil, nil, err
			}
			return d.Target(), d.View(now), nil, nil
		}})
}

// Start asks for a run of the drill now (or a dry run). The leader's job
// runs its preflight and, if that passes, the drill; the run answers at
// once, pending.
func (s *Service) Start(ctx context.Context, a server.Actor, app, name string, in RunInput) (*Run, error) {
	d, err := s.Get(ctx, app, name)
	if err != nil {
		return nil, err
	}
	now := s.cfg.Service.Now()
	var run *Run
	err = s.cfg.Service.Commit(ctx, server.Audited{Actor: a, Action: audit.DrillRun, Reason: in.Reason, App: app,
		Apply: func(tx *gorm.DB) (string, any, any, error) {
			if err := checkDrillVersion(tx, app, name, in.Version); err != nil {
				return "", nil, nil, err
			}
			r, err := newRun(tx, d, now)
			if err != nil {
				return "", nil, nil, err
			}
			if open, err := openRun(tx, app, name); err != nil {
				return "", nil, nil, err
			} else if open != nil {
				return "", nil, nil, &server.ExistsError{Field: "run", Name: fmt.Sprintf("run #%d of %s/%s is in progress", open.Number, app, name)}
			}
			r.DryRun, r.StartedVia, r.StartedBy, r.StartedByKind, r.Reason = in.DryRun, ViaManual, a.Name, a.Kind, strings.TrimSpace(in.Reason)
			if err := tx.Create(r).Error; err != nil {
				return "", nil, nil, err
			}
			run = r
			return d.Target(), nil, r.View(), nil
		}})
	if err != nil {
		return nil, err
	}
	s.job.kick()
	return run, nil
}

// checkDrillVersion compares the caller's expected version of drill
// app/name (nil: any) with the stored one, read inside tx.
func checkDrillVersion(tx *gorm.DB, app, name string, expected *int64) error {
	if expected == nil {
		return nil
	}
	var cur Drill
	if err := tx.Select("version").Where("app = ? AND name = ?", app, name).Take(&cur).Error; err != nil {
		return err
	}
	return server.CheckVersion(expected, cur.Version)
}

// newRun makes the next run of d (not yet saved), pending. It stores d's
// spec without probe header values, named by d's version and its hash.
func newRun(tx *gorm.DB, d *Drill, now time.Time) (*Run, error) {
	var last struct{ N int64 }
	if err := tx.Model(&Run{}).Select("COALESCE(MAX(number), 0) AS n").Where("app = ? AND drill = ?", d.App, d.Name).Scan(&last).Error; err != nil {
		return nil, err
	}
	sp, err := d.spec()
	if err != nil {
		return nil, fmt.Errorf("drill %s: stored spec: %w", d.Target(), err)
	}
	spec, err := json.Marshal(sp.secretFree())
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(spec)
	return &Run{App: d.App, Drill: d.Name, SwitchName: d.SwitchName, Number: last.N + 1, Phase: PhasePending, Count: 1,
		Spec: string(spec), DrillVersion: d.Version, SpecSHA256: hex.EncodeToString(sum[:]), State: "{}", CreatedAt: now}, nil
}

// openRun returns the drill's run in progress, nil when none.
func openRun(tx *gorm.DB, app, name string) (*Run, error) {
	var r Run
	err := tx.Where("app = ? AND drill = ? AND finished_at IS NULL", app, name).Take(&r).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, nil
	}
	return &r, err
}

// Abort ends a run early with a reason: the leader removes its override at
// its next step (within a fraction of a second), then checks the fleet
// recovered. A run not started yet ends at once.
func (s *Service) Abort(ctx context.Context, a server.Actor, app, name string, number int64, in AbortInput) (*Run, error) {
	var out Run
	err := s.cfg.Service.Commit(ctx, server.Audited{Actor: a, Action: audit.DrillAbort, Reason: in.Reason, App: app,
		Apply: func(tx *gorm.DB) (string, any, any, error) {
			if err := checkDrillVersion(tx, app, name, in.Version); err != nil {
				return "", nil, nil, err
			}
			if err := tx.Where("app = ? AND drill = ? AND number = ?", app, name, number).Take(&out).Error; err != nil {
				return "", nil, nil, err
			}
			before := out.View()
			if !out.Open() || out.Phase == PhaseRecovering {
				if out.Outcome == "" {
					return "", nil, nil, server.Conflictf("run #%d is reverting already", number)
				}
				return "", nil, nil, server.Conflictf("run #%d has already ended (%s)", number, out.Outcome)
			}
			out.AbortRequest = fmt.Sprintf("aborted by %s: %s", a.Name, strings.TrimSpace(in.Reason))
			if err := tx.Model(&Run{}).Where("id = ?", out.ID).Update("abort_request", out.AbortRequest).Error; err != nil {
				return "", nil, nil, err
			}
			return out.target(), before, out.View(), nil
		}})
	if err != nil {
		return nil, err
	}
	s.job.kick()
	return &out, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// Runs returns one page of the runs of a drill, newest first, and the
// cursor of the next page.
func (s *Service) Runs(ctx context.Context, app, name string, pg server.Page) ([]Run, string, error) {
	q, err := pg.Newest(s.db.WithContext(ctx).Where("app = ? AND drill = ?", app, name), "number")
	if err != nil {
		return nil, "", err
	}
	var out []Run
	if err := q.Find(&out).Error; err != nil {
		return nil, "", readErr(err, "runs")
	}
	out, next := server.Cut(out, pg, func(r *Run) string { return server.IDKey(r.Number) })
	return out, next, nil
}

// Run returns run number of a drill.
func (s *Service) Run(ctx context.Context, app, name string, number int64) (*Run, error) {
	var r Run
	err := s.db.WithContext(ctx).Where("app = ? AND drill = ? AND number = ?", app, name, number).Take(&r).Error
	return &r, readErr(err, fmt.Sprintf("run #%d of drill %s/%s", number, app, name))
}

// OpenRuns returns the runs in progress of a switch (every switch of app
// when name is "").
func (s *Service) OpenRuns(ctx context.Context, app, name string) ([]Run, error) {
	q := s.db.WithContext(ctx).Where("app = ? AND finished_at IS NULL", app)
	if name != "" {
		q = q.Where("switch_name = ?", name)
	}
	var out []Run
	return out, readErr(q.Order("id").Find(&out).Error, "runs")
}

// LastPassed returns when a drill of switch app/name last passed (a real
// run, not a dry run); false when none ever did.
func (s *Service) LastPassed(ctx context.Context, app, name string) (time.Time, bool, error) {
	var r Run
	err := s.db.WithContext(ctx).Where("app = ? AND switch_name = ? AND outcome = ? AND dry_run = ? AND finished_at IS NOT NULL",
		app, name, OutcomePassed, false).Order("finished_at DESC").Limit(1).Find(&r).Error
	if err != nil {
		return time.Time{}, false, readErr(err, "runs")
	}
	if r.ID == 0 {
		return time.Time{}, false, nil
	}
	return r.FinishedAt.UTC(), true, nil
}

// OnPersonChange ends the drills of a switch a person just changed,
// inside the person's transaction (register it with
// server.Service.OnPersonChange): the override would hide their change.
// The leader removes the override at its next step.
func (s *Service) OnPersonChange(j *server.JobTx, c server.PersonChange) error {
	var runs []Run
	if err := j.DB().Where("app = ? AND switch_name = ? AND finished_at IS NULL AND dry_run = ? AND abort_request = '' AND phase <> ?",
		c.App, c.Name, false, PhaseRecovering).Find(&runs).Error; err != nil {
		return err
	}
	for i := range runs {
		r := &runs[i]
		why := fmt.Sprintf("%s %s changed the switch (%s): a person's change ends the drill", c.Actor.Kind, c.Actor.Name, c.Action)
		err := j.Commit(server.Audited{Actor: c.Actor, Action: audit.DrillAbort, Reason: why, App: c.App,
			Apply: func(tx *gorm.DB) (string, any, any, error) {
				before := r.View()
				r.AbortRequest = why
				if err := tx.Model(&Run{}).Where("id = ?", r.ID).Update("abort_request", why).Error; err != nil {
					return "", nil, nil, err
				}
				return r.target(), before, r.View(), nil
			}})
		if err != nil {
			return err
		}
	}
	if len(runs) > 0 {
		s.job.kick()
	}
	return nil
}

// Now is the console's clock.
func (s *Service) Now() time.Time { return s.cfg.Service.Now() }
