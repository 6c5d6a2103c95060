// Package finding keeps the findings: things about a switch or a job that
// a person should look at — a switch on past its expiry, one never drilled
// or never read, a locked trigger, a failed drill, a paused rollout. There
// is at most one open finding per kind and target; the job that sees the
// cause go away resolves it and says why. Opening a finding notifies.
package finding

import (
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/switchyard-io/switchyard/server/retention"

	"github.com/switchyard-io/switchyard/sdk/wire"
	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/notify"
)

// Kind names what a finding is about.
type Kind string

// Finding kinds.
const (
	ExpiredOn      Kind = "expired_on"      // a switch on past its expires_at (remind policy)
	ExpiryReminder Kind = "expiry_reminder" // a switch that expires soon
	NeverDrilled   Kind = "never_drilled"   // no passing drill in 90 days
	NeverRead      Kind = "never_read"      // no instance read the switch in 30 days
	NoOwner        Kind = "no_owner"        // a switch without an owner
	TriggerLocked  Kind = "trigger_locked"  // an auto-trigger locked itself after flapping
	DrillFailed    Kind = "drill_failed"    // a drill's verdict failed
	RolloutPaused  Kind = "rollout_paused"  // a staged rollout paused by a gate or a person
	TriggerHandoff Kind = "trigger_handoff" // an auto-trigger hit max_on and handed the switch to a person
	// TriggerOverridden: another automation changed a switch against
	// what its auto-trigger held; the rule locked.
	TriggerOverridden Kind = "trigger_overridden"
	// FallbackMismatch: shadow verification found the fallback of an L1
	// or L2 switch no longer shaped like the live answer.
	FallbackMismatch Kind = "fallback_mismatch"
	// FallbackUnverified: an L1 or L2 switch off for long, with
	// instances reporting, and no shadow sample matched in that time.
	FallbackUnverified Kind = "fallback_unverified"
	// BreakGlassReview: a held change was applied without approval;
	// another person must review it (server/approval).
	BreakGlassReview Kind = "break_glass_review"
)

// Severities.
const (
	Info     = "info"
	Warning  = "warning"
	Critical = "critical"
)

// Finding is a finding as stored.
type Finding struct {
	ID         int64      `gorm:"primaryKey" json:"id"`
	Kind       Kind       `json:"kind"`
	Target     string     `json:"target"`
	App        string     `json:"app,omitempty"`
	Severity   string     `json:"severity"`
	Summary    string     `json:"summary"`
	Detail     string     `json:"detail,omitempty"`
	Since      time.Time  `json:"since"`
	UpdatedAt  time.Time  `json:"updated_at"`
	ResolvedAt *time.Time `json:"resolved_at,omitempty"`
	Resolution string     `json:"resolution,omitempty"`
	// A person acknowledged it (Service.Ack); it stays open until its
	// cause goes away.
	AckedBy   string     `json:"acked_by,omitempty"`
	AckedAt   *time.Time `json:"acked_at,omitempty"`
	AckReason string     `json:"ack_reason,omitempty"`
	// Version moves when the finding is acknowledged or resolved (not
	// when a job refreshes its summary).
	Version int64 `json:"version"`
}

// Target of the finding's audit events: "finding/<id>".
func (f *Finding) auditTarget() string { return fmt.Sprintf("finding/%d", f.ID) }

// TableName pins the table name.
func (Finding) TableName() string { return "findings" }

// Spec describes a finding to open.
type Spec struct {
	Kind     Kind
	Target   string // "switch/checkout/recommend", "trigger/checkout/cpu-high"
	App      string
	Severity string
	Summary  string // one line
	Detail   string
}

// Open opens the finding of s.Kind on s.Target inside tx at now, or
// refreshes its summary when it is already open. A newly opened finding
// enqueues a finding.opened notification in the same transaction. It
// reports whether the finding is new.
func Open(tx *gorm.DB, s Spec, now time.Time) (bool, error) {
	if s.Kind == "" || s.Target == "" || s.Summary == "" {
		return false, errors.New("finding: kind, target and summary are required")
	}
	switch s.Severity {
	case Info, Warning, Critical:
	default:
		return false, fmt.Errorf("finding: unknown severity %q", s.Severity)
	}
	now = now.UTC()
	var cur Finding
	err := tx.Where("kind = ? AND target = ? AND resolved_at IS NULL", s.Kind, s.Target).Take(&cur).Error
	switch {
	case err == nil:
		return false, tx.Model(&cur).Updates(map[string]any{"summary": s.Summary, "detail": s.Detail, "severity": s.Severity, "updated_at": now}).Error
	case !errors.Is(err, gorm.ErrRecordNotFound):
		return false, err
	}
	f := &Finding{Kind: s.Kind, Target: s.Target, App: s.App, Severity: s.Severity, Summary: s.Summary, Detail: s.Detail, Since: now, UpdatedAt: now, Version: 1}
	if err := tx.Create(f).Error; err != nil {
		return false, err
	}
	return true, notify.Enqueue(tx, notify.Event{
		Key: fmt.Sprintf("finding/%d/opened", f.ID), Kind: notify.FindingOpened, App: s.App, Target: s.Target,
		Title: s.Summary, Body: s.Detail, At: now,
		Data: map[string]any{"finding": f.ID, "kind": s.Kind, "severity": s.Severity},
	})
}

// Resolve resolves the open finding of kind on target inside tx, saying
// why (the cause went away: "renewed by olga", "drill passed"), and
// enqueues a finding.resolved notification in the same transaction. It
// reports whether a finding was open.
func Resolve(tx *gorm.DB, kind Kind, target, why string, now time.Time) (bool, error) {
	now = now.UTC()
	var cur Finding
	err := tx.Where("kind = ? AND target = ? AND resolved_at IS NULL", kind, target).Take(&cur).Error
	switch {
	case errors.Is(err, gorm.ErrRecordNotFound):
		return false, nil
	case err != nil:
		return false, err
	}
	res := tx.Model(&Finding{}).Where("id = ? AND resolved_at IS NULL", cur.ID).
		Updates(map[string]any{"resolved_at": now, "resolution": why, "updated_at": now, "version": cur.Version + 1})
	if res.Error != nil || res.RowsAffected == 0 {
		return false, res.Error
	}
	return true, notify.Enqueue(tx, notify.Event{
		Key: fmt.Sprintf("finding/%d/resolved", cur.ID), Kind: notify.FindingResolved, App: cur.App, Target: cur.Target,
		Title: "Resolved: " + cur.Summary, Body: why, At: now,
		Data: map[string]any{"finding": cur.ID, "kind": cur.Kind, "severity": cur.Severity, "since": cur.Since.UTC(), "resolution": why},
	})
}

// Filter selects findings.
type Filter struct {
	Kind   Kind
	App    string
	Target string
	// Open: only open findings; Resolved: only resolved ones; neither: all.
	Open, Resolved bool
}

// ParseFilter reads the filters people give — kind, app and state (open,
// resolved or all; empty is open) — naming each one that is wrong.
func ParseFilter(kind, app, state string) (Filter, []*server.FieldError) {
	var bad server.FieldErrors
	f := Filter{Kind: Kind(kind), App: app}
	if f.Kind != "" && !f.Kind.Valid() {
		bad.Add("kind", "is not a finding kind")
	}
	if f.App != "" && !wire.ValidApp(f.App) {
		bad.Add("app", "must match ^[a-z0-9][a-z0-9._-]{0,62}$")
	}
	switch state {
	case "open", "":
		f.Open = true
	case "resolved":
		f.Resolved = true
	case "all":
	default:
		bad.Add("state", `must be "open", "resolved" or "all"`)
	}
	return f, bad
}

// where narrows q to the findings f selects.
func (f Filter) where(q *gorm.DB) *gorm.DB {
	q = q.Model(&Finding{})
	if f.Kind != "" {
		q = q.Where("kind = ?", f.Kind)
	}
	if f.App != "" {
		q = q.Where("app = ?", f.App)
	}
	if f.Target != "" {
		q = q.Where("target = ?", f.Target)
	}
	switch {
	case f.Open:
		q = q.Where("resolved_at IS NULL")
	case f.Resolved:
		q = q.Where("resolved_at IS NOT NULL")
	}
	return q
}

// List returns every finding matching f, newest first.
func List(db *gorm.DB, f Filter) ([]Finding, error) {
	var out []Finding
	err := f.where(db).Order("id DESC").Find(&out).Error
	return out, err
}

// OpenCounts returns the number of open findings matching f (its state
// aside) by severity.
func OpenCounts(db *gorm.DB, f Filter) (map[string]int64, error) {
	f.Open, f.Resolved = true, false
	var rows []struct {
		Severity string
		N        int64
	}
	err := f.where(db).Select("severity, count(*) AS n").Group("severity").Scan(&rows).Error
	out := map[string]int64{}
	for _, r := range rows {
		out[r.Severity] = r.N
	}
	return out, err
}

// OpenByKind returns the number of open findings of every kind (zero
// included).
func OpenByKind(db *gorm.DB) (map[Kind]int64, error) {
	var rows []struct {
		Kind Kind
		N    int64
	}
	err := db.Model(&Finding{}).Select("kind, count(*) AS n").Where("resolved_at IS NULL").Group("kind").Scan(&rows).Error
	out := make(map[Kind]int64, len(Kinds))
	for _, k := range Kinds {
		out[k] = 0
	}
	for _, r := range rows {
		out[r.Kind] = r.N
	}
	return out, err
}

// PruneResolved deletes the findings resolved before cut
// (server/retention); open findings stay whatever their age.
func PruneResolved(tx *gorm.DB, cut time.Time, limit int) (int64, error) {
	return retention.Delete(tx, &Finding{}, limit, "resolved_at < ?", cut)
}
