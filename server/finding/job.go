package finding

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/switchyard-io/switchyard/sdk/wire"
	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/fleet"
)

// Fleet is what the findings job reads of the fleet model.
type Fleet interface {
	// Summary is the fleet's view of a switch without its per-instance
	// entries (its reads: Signals, LastRead); the job asks it of every
	// switch each step.
	Summary(app, name string) fleet.SwitchView
	// Synced reports whether the model follows etcd right now.
	Synced() bool
}

// LastPassedFunc answers when the last passing drill of switch app/name
// ended: false when none ever passed. The drills domain provides it.
type LastPassedFunc func(ctx context.Context, app, name string) (time.Time, bool, error)

// JobConfig configures the findings job; zero fields take the defaults.
type JobConfig struct {
	// Every is the period of the job (default 10s).
	Every time.Duration
	// NeverReadAfter: a switch no instance read for this long is
	// never_read (default 30 days); NeverDrilledAfter: one without a
	// passing drill for this long is never_drilled (default 90 days).
	NeverReadAfter, NeverDrilledAfter time.Duration
	// DrillCheckEvery is how often LastPassed is asked, for every switch
	// (default 10m).
	DrillCheckEvery time.Duration
	// UnverifiedAfter: an L1 or L2 switch off this long while instances
	// report, without a matching shadow sample in that time, is
	// fallback_unverified (default 7 days).
	UnverifiedAfter time.Duration
	// Fleet answers never_read; nil leaves never_read unjudged.
	Fleet Fleet
	// LastPassed answers never_drilled; nil leaves it unjudged.
	LastPassed LastPassedFunc
	Logger     *slog.Logger
}

func (c *JobConfig) defaults() {
	set := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	set(&c.Every, 10*time.Second)
	set(&c.NeverReadAfter, 30*24*time.Hour)
	set(&c.NeverDrilledAfter, 90*24*time.Hour)
	set(&c.DrillCheckEvery, 10*time.Minute)
	set(&c.UnverifiedAfter, 7*24*time.Hour)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Job is the leader's findings job: every step it judges each switch for
// no_owner, never_read (from the fleet signals) and never_drilled (from
// the drills domain), opens what is bad, resolves what is good again —
// saying why — and leaves alone what it cannot tell (no data is not a
// verdict). Findings of switches that were deleted are resolved.
type Job struct {
	svc *server.Service
	cfg JobConfig
	// The step goroutine's own: the last answers of LastPassed.
	drillsAt time.Time
	drills   map[string]drillFact
}

type drillFact struct {
	at    time.Time
	known bool // the drills domain answered
	ok    bool // a drill ever passed
}

// NewJob returns the findings job on svc.
func NewJob(svc *server.Service, cfg JobConfig) *Job {
	cfg.defaults()
	return &Job{svc: svc, cfg: cfg, drills: map[string]drillFact{}}
}

// Name names the job in logs.
func (j *Job) Name() string { return "findings" }

// Every is the period between steps.
func (j *Job) Every() time.Duration { return j.cfg.Every }

// readRow is what the job has seen of a switch's reads (switch_reads).
type readRow struct {
	App          string `gorm:"primaryKey"`
	Name         string `gorm:"primaryKey"`
	WatchedSince time.Time
	LastRead     *time.Time
}

func (readRow) TableName() string { return "switch_reads" }

// Facts is what the findings job knows of one switch at one time.
type Facts struct {
	App, Name, Owner string
	Created          time.Time
	// Reporting: the fleet model is synced and instances that report
	// signals evaluate the switch now, so an absent read means something.
	Reporting bool
	// WatchedSince is since when reporting instances have been seen (nil:
	// never); LastRead the newest read seen, stored or live.
	WatchedSince, LastRead *time.Time
	// DrillKnown: the drills domain answered; LastPassed is its last
	// passing drill (nil: none ever).
	DrillKnown bool
	LastPassed *time.Time
	// Verifiable: an L1 or L2 switch that is off and does not disable
	// shadow verification; OffSince is when it was last changed.
	Verifiable bool
	OffSince   time.Time
	// Verification is the fleet's shadow verification of its fallback
	// (nil: no instance reports any).
	Verification *fleet.Verification
}

// Target is how findings name the switch.
func (f *Facts) Target() string { return "switch/" + f.App + "/" + f.Name }

// Outcome is a verdict's kind: the cause is there, gone, or unknown.
type Outcome int

// Outcomes of a verdict.
const (
	Unknown Outcome = iota // no data: neither open nor resolve
	Bad                    // open the finding
	Good                   // resolve it, saying Why
)

// Verdict is the judgment of one kind of finding on one switch.
type Verdict struct {
	Kind    Kind
	Outcome Outcome
	Spec    Spec   // when Bad
	Why     string // when Good: what made the cause go away
}

// Judge is the findings job's decision for one switch at now: a verdict
// per kind it owns (no_owner, never_read, never_drilled, fallback_mismatch,
// fallback_unverified).
func Judge(f Facts, now time.Time, cfg JobConfig) []Verdict {
	cfg.defaults()
	name := f.App + "/" + f.Name
	spec := func(kind Kind, sev, summary, detail string) Spec {
		return Spec{Kind: kind, Target: f.Target(), App: f.App, Severity: sev, Summary: summary, Detail: detail}
	}
	var out []Verdict

	owner := Verdict{Kind: NoOwner, Outcome: Good, Why: "owner set to " + f.Owner}
	if f.Owner == "" {
		owner = Verdict{Kind: NoOwner, Outcome: Bad, Spec: spec(NoOwner, Info, name+" has no owner",
			"Set its owner, so the people reminded of it and paged for it are the ones who know what it does.")}
	}
	out = append(out, owner)

	read := Verdict{Kind: NeverRead}
	watched := f.Created
	if f.WatchedSince != nil && f.WatchedSince.After(watched) {
		watched = *f.WatchedSince
	}
	switch {
	case f.LastRead != nil && now.Sub(*f.LastRead) < cfg.NeverReadAfter:
		read.Outcome, read.Why = Good, "read by an instance at "+f.LastRead.UTC().Format(time.RFC3339)
	case f.Reporting && f.WatchedSince != nil && now.Sub(watched) >= cfg.NeverReadAfter:
		last := "no instance has read it since the console started watching its reads, " + f.WatchedSince.UTC().Format(time.RFC3339)
		if f.LastRead != nil {
			last = "the last read was at " + f.LastRead.UTC().Format(time.RFC3339)
		}
		read.Outcome, read.Spec = Bad, spec(NeverRead, Warning, fmt.Sprintf("No instance has read %s in %s", name, days(cfg.NeverReadAfter)),
			"Instances of its app report signals, but "+last+". A switch no code checks does nothing when it is turned on: fix the code or delete the switch.")
	}
	out = append(out, read)

	drill := Verdict{Kind: NeverDrilled}
	since := f.Created
	if f.LastPassed != nil && f.LastPassed.After(since) {
		since = *f.LastPassed
	}
	switch {
	case !f.DrillKnown:
	case f.LastPassed != nil && now.Sub(*f.LastPassed) < cfg.NeverDrilledAfter:
		drill.Outcome, drill.Why = Good, "a drill passed at "+f.LastPassed.UTC().Format(time.RFC3339)
	case now.Sub(since) >= cfg.NeverDrilledAfter:
		detail := "It has never passed a drill."
		if f.LastPassed != nil {
			detail = "Its last passing drill ended at " + f.LastPassed.UTC().Format(time.RFC3339) + "."
		}
		drill.Outcome, drill.Spec = Bad, spec(NeverDrilled, Warning, fmt.Sprintf("%s has not passed a drill in %s", name, days(cfg.NeverDrilledAfter)),
			detail+" A degradation nobody has exercised is not known to work: schedule a drill.")
	}
	out = append(out, drill)
	return append(out, judgeFallback(f, now, cfg, spec)...)
}

// judgeFallback judges fallback_mismatch and fallback_unverified from the
// fleet's shadow verification. A mismatch is bad while any reporting
// instance's newest sample differed; it is good again once instances
// report only matches. Unverified is bad when a verifiable switch was off
// for UnverifiedAfter, with instances reporting for as long, and no
// sample matched in that time.
func judgeFallback(f Facts, now time.Time, cfg JobConfig, spec func(kind Kind, sev, summary, detail string) Spec) []Verdict {
	name := f.App + "/" + f.Name
	v := f.Verification
	mismatch := Verdict{Kind: FallbackMismatch}
	switch {
	case !f.Reporting || v == nil:
	case v.Mismatching > 0:
		detail := fmt.Sprintf("On %d of %d instances verifying it, the newest shadow sample of the degraded path had another shape than the live answer (%d mismatches, %d matches, %d errors, %d timeouts so far). Differences: %s. "+
			"The fallback would serve callers a broken answer: fix it before the switch is needed.",
			v.Mismatching, v.Instances, v.Mismatch, v.Match, v.Errors, v.Timeouts, strings.Join(v.Diffs, "; "))
		mismatch.Outcome, mismatch.Spec = Bad, spec(FallbackMismatch, Warning, fmt.Sprintf("The fallback of %s lost the live answer's shape: %s", name, strings.Join(v.Diffs, "; ")), detail)
	case v.Verified > 0:
		mismatch.Outcome, mismatch.Why = Good, fmt.Sprintf("verified on %d/%d instances, last at %s", v.Verified, v.Instances, v.LastMatch.UTC().Format(time.RFC3339))
	}
	unverified := Verdict{Kind: FallbackUnverified}
	watched := f.OffSince
	if f.WatchedSince != nil && f.WatchedSince.After(watched) {
		watched = *f.WatchedSince
	}
	switch {
	case !f.Verifiable:
		unverified.Outcome, unverified.Why = Good, "not an L1 or L2 switch that is off with verification on"
	case v != nil && v.LastMatch != nil && now.Sub(*v.LastMatch) < cfg.UnverifiedAfter:
		unverified.Outcome, unverified.Why = Good, "a shadow sample matched at "+v.LastMatch.UTC().Format(time.RFC3339)
	case f.Reporting && f.WatchedSince != nil && now.Sub(watched) >= cfg.UnverifiedAfter:
		unverified.Outcome, unverified.Spec = Bad, spec(FallbackUnverified, Info, fmt.Sprintf("The fallback of %s was not verified in %s", name, days(cfg.UnverifiedAfter)),
			"Instances of its app report signals, but no shadow sample of its degraded path matched the live answer. List the switch in the SDK middleware's Verify option (or wrap the call in sdk.Verify) so its fallback is checked while it is off.")
	}
	return []Verdict{mismatch, unverified}
}

func days(d time.Duration) string {
	if d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%d days", d/(24*time.Hour))
	}
	return d.String()
}

// mine are the kinds this job opens and resolves.
var mine = []Kind{NoOwner, NeverRead, NeverDrilled, FallbackMismatch, FallbackUnverified}

// switchRow is what the job reads of a switch.
type switchRow struct {
	App, Name, Owner     string
	Level, State         string
	Verify               string
	CreatedAt, UpdatedAt time.Time
}

// verifiable: an L1 or L2 switch that is off and does not disable shadow
// verification.
func (s *switchRow) verifiable() bool {
	if (s.Level != string(wire.L1) && s.Level != string(wire.L2)) || s.State != wire.StateOff {
		return false
	}
	sw := server.Switch{Verify: s.Verify}
	v := sw.VerifySpec()
	return v == nil || !v.Disabled
}

// Step judges every switch and applies the verdicts.
func (j *Job) Step(ctx context.Context, t server.Term, now time.Time) error {
	now = now.UTC()
	db := j.svc.DB().WithContext(ctx)
	var switches []switchRow
	if err := db.Table("switches").Select("app, name, owner, level, state, verify, created_at, updated_at").Order("app, name").Scan(&switches).Error; err != nil {
		return err
	}
	var open []Finding
	if err := db.Where("resolved_at IS NULL AND kind IN ?", mine).Find(&open).Error; err != nil {
		return err
	}
	var reads []readRow
	if err := db.Find(&reads).Error; err != nil {
		return err
	}
	isOpen := map[string]bool{}
	for _, f := range open {
		isOpen[string(f.Kind)+" "+f.Target] = true
	}
	stored := map[string]*readRow{}
	for i := range reads {
		stored[reads[i].App+"/"+reads[i].Name] = &reads[i]
	}
	j.askDrills(ctx, switches, now)

	var ops []func(tx *gorm.DB) error
	exists := map[string]bool{}
	for _, s := range switches {
		key := s.App + "/" + s.Name
		exists[key] = true
		f := Facts{App: s.App, Name: s.Name, Owner: s.Owner, Created: s.CreatedAt.UTC(), Verifiable: s.verifiable(), OffSince: s.UpdatedAt.UTC()}
		if row, write := j.reads(&f, stored[key], now); write {
			ops = append(ops, func(tx *gorm.DB) error {
				return tx.Clauses(clause.OnConflict{UpdateAll: true}).Create(row).Error
			})
		}
		if d, ok := j.drills[key]; ok && d.known {
			f.DrillKnown = true
			if d.ok {
				at := d.at
				f.LastPassed = &at
			}
		}
		for _, v := range Judge(f, now, j.cfg) {
			switch {
			case v.Outcome == Bad && !isOpen[string(v.Kind)+" "+f.Target()]:
				spec := v.Spec
				ops = append(ops, func(tx *gorm.DB) error { _, err := Open(tx, spec, now); return err })
			case v.Outcome == Good && isOpen[string(v.Kind)+" "+f.Target()]:
				kind, target, why := v.Kind, f.Target(), v.Why
				ops = append(ops, func(tx *gorm.DB) error { _, err := Resolve(tx, kind, target, why, now); return err })
			}
		}
	}
	for _, f := range open {
		if app, name, ok := switchOf(f.Target); ok && !exists[app+"/"+name] {
			kind, target := f.Kind, f.Target
			ops = append(ops, func(tx *gorm.DB) error {
				_, err := Resolve(tx, kind, target, "the switch was deleted", now)
				return err
			})
		}
	}
	for key, r := range stored {
		if !exists[key] {
			app, name := r.App, r.Name
			ops = append(ops, func(tx *gorm.DB) error { return tx.Where("app = ? AND name = ?", app, name).Delete(&readRow{}).Error })
		}
	}
	return j.apply(ctx, t, ops)
}

// reads fills f's read facts from the fleet and the stored row, and
// returns the row to store when it changed (a new watched switch, or a
// read an hour or more newer than the stored one).
func (j *Job) reads(f *Facts, stored *readRow, now time.Time) (*readRow, bool) {
	if stored != nil {
		w := stored.WatchedSince.UTC()
		f.WatchedSince, f.LastRead = &w, utc(stored.LastRead)
	}
	if j.cfg.Fleet == nil {
		return nil, false
	}
	v := j.cfg.Fleet.Summary(f.App, f.Name)
	f.Reporting = j.cfg.Fleet.Synced() && v.Signals > 0
	f.Verification = v.Verification
	live := utc(v.LastRead)
	if live != nil && live.After(now) {
		live = &now // an instance's clock ahead of ours
	}
	if live != nil && (f.LastRead == nil || live.After(*f.LastRead)) {
		f.LastRead = live
	}
	switch {
	case stored == nil && f.Reporting:
		f.WatchedSince = &now
		return &readRow{App: f.App, Name: f.Name, WatchedSince: now, LastRead: f.LastRead}, true
	case stored != nil && live != nil && (stored.LastRead == nil || live.Sub(*stored.LastRead) >= time.Hour):
		return &readRow{App: f.App, Name: f.Name, WatchedSince: stored.WatchedSince.UTC(), LastRead: live}, true
	}
	return nil, false
}

// askDrills asks LastPassed about every switch once per DrillCheckEvery.
func (j *Job) askDrills(ctx context.Context, switches []switchRow, now time.Time) {
	if j.cfg.LastPassed == nil || (!j.drillsAt.IsZero() && now.Sub(j.drillsAt) < j.cfg.DrillCheckEvery) {
		return
	}
	next := make(map[string]drillFact, len(switches))
	var failed error
	for _, s := range switches {
		at, ok, err := j.cfg.LastPassed(ctx, s.App, s.Name)
		if err != nil {
			failed = err
			continue // unknown: the verdict waits
		}
		next[s.App+"/"+s.Name] = drillFact{at: at.UTC(), known: true, ok: ok}
	}
	if failed != nil {
		j.cfg.Logger.Warn("findings: the drills domain did not answer for some switches; never_drilled waits", "err", failed)
	}
	j.drills, j.drillsAt = next, now
}

// applyBatch bounds the changes of one transaction.
const applyBatch = 100

// apply runs ops in fenced transactions of at most applyBatch each.
func (j *Job) apply(ctx context.Context, t server.Term, ops []func(tx *gorm.DB) error) error {
	for len(ops) > 0 {
		n := min(len(ops), applyBatch)
		batch := ops[:n]
		ops = ops[n:]
		if _, err := j.svc.InTerm(ctx, t, func(jt *server.JobTx) error {
			for _, op := range batch {
				if err := op(jt.DB()); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return err
		}
	}
	return nil
}

// switchOf parses a finding's "switch/<app>/<name>" target.
func switchOf(target string) (app, name string, ok bool) {
	rest, ok := strings.CutPrefix(target, "switch/")
	if !ok {
		return "", "", false
	}
	return strings.Cut(rest, "/")
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// Kinds lists every finding kind, for filters.
var Kinds = []Kind{ExpiredOn, ExpiryReminder, NeverDrilled, NeverRead, NoOwner, TriggerLocked, DrillFailed, RolloutPaused, TriggerHandoff, TriggerOverridden,
	FallbackMismatch, FallbackUnverified, BreakGlassReview}

// Valid reports whether k is a known kind.
func (k Kind) Valid() bool { return slices.Contains(Kinds, k) }
