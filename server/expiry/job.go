package expiry

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/sdk/wire"
	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/finding"
	"github.com/switchyard-io/switchyard/server/notify"
)

// stateRow stores a State (expiry_states).
type stateRow struct {
	App         string `gorm:"primaryKey"`
	Name        string `gorm:"primaryKey"`
	ExpiresAt   time.Time
	RemindedAt  *time.Time
	ExpiredAt   *time.Time
	EscalatedAt *time.Time
}

func (stateRow) TableName() string { return "expiry_states" }

func (r *stateRow) state() *State {
	if r == nil {
		return nil
	}
	return &State{ExpiresAt: r.ExpiresAt.UTC(), RemindedAt: utc(r.RemindedAt), ExpiredAt: utc(r.ExpiredAt), EscalatedAt: utc(r.EscalatedAt)}
}

// Job is the leader's expiry job. Each step it looks at the switches that
// are on and expire within RemindBefore, and at those it has progress on,
// and acts on each in a fenced transaction of its own: a switch whose
// step fails (a person changed it meanwhile: 409) does not hold up the
// others, and is looked at again next step.
type Job struct {
	s *Service
}

// Name names the job in logs.
func (j *Job) Name() string { return "expiry" }

// Every is the period between steps.
func (j *Job) Every() time.Duration { return j.s.cfg.Every }

// Step acts on every switch whose expiry asks for it at now.
func (j *Job) Step(ctx context.Context, t server.Term, now time.Time) error {
	now = now.UTC()
	db := j.s.svc.DB().WithContext(ctx)
	var due []server.Switch
	if err := db.Where("state = ? AND expires_at <= ?", wire.StateOn, now.Add(j.s.cfg.RemindBefore)).Find(&due).Error; err != nil {
		return err
	}
	var rows []stateRow
	if err := db.Find(&rows).Error; err != nil {
		return err
	}
	// A quick look outside any transaction: most switches in the window,
	// and most with progress, need nothing this step. A switch with
	// progress that is not in the window (renewed, off, deleted) does.
	type key struct{ app, name string }
	seen := map[key]bool{}
	var keys []key
	for _, sw := range due {
		k := key{sw.App, sw.Name}
		seen[k] = true
		if _, act := Decide(view(&sw), stateOf(rows, sw.App, sw.Name), now, j.s.cfg); !act.None() {
			keys = append(keys, k)
		}
	}
	for _, r := range rows {
		if k := (key{r.App, r.Name}); !seen[k] {
			seen[k], keys = true, append(keys, k)
		}
	}
	sort.Slice(keys, func(a, b int) bool {
		return keys[a].app < keys[b].app || (keys[a].app == keys[b].app && keys[a].name < keys[b].name)
	})
	var errs []error
	for _, k := range keys {
		_, err := j.s.svc.InTerm(ctx, t, func(jt *server.JobTx) error { return j.s.step(jt, k.app, k.name, now) })
		if errors.Is(err, server.ErrNotLeader) || ctx.Err() != nil {
			return err
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s/%s: %w", k.app, k.name, err))
		}
	}
	return errors.Join(errs...)
}

func stateOf(rows []stateRow, app, name string) *State {
	for i := range rows {
		if rows[i].App == app && rows[i].Name == name {
			return rows[i].state()
		}
	}
	return nil
}

// view is what Decide needs of sw (nil: deleted).
func view(sw *server.Switch) *Switch {
	if sw == nil {
		return nil
	}
	d, _ := server.ParseDuration(sw.MaxOn)
	return &Switch{On: sw.State == wire.StateOn, Policy: sw.ExpiryPolicy, MaxOn: d, ExpiresAt: utc(sw.ExpiresAt)}
}

// step decides and acts on switch app/name inside the job's transaction,
// from what the transaction reads.
func (s *Service) step(jt *server.JobTx, app, name string, now time.Time) error {
	tx := jt.DB()
	sw, err := jt.Switch(app, name)
	if errors.Is(err, server.ErrNotFound) {
		sw, err = nil, nil
	}
	if err != nil {
		return err
	}
	var row stateRow
	var st *State
	switch err := tx.Where("app = ? AND name = ?", app, name).Take(&row).Error; {
	case err == nil:
		st = row.state()
	case !errors.Is(err, gorm.ErrRecordNotFound):
		return err
	}
	next, act := Decide(view(sw), st, now, s.cfg)
	if act.None() {
		return nil
	}
	target := "switch/" + app + "/" + name
	if act.Resolve != "" {
		if err := resolve(tx, target, act.Resolve, now); err != nil {
			return err
		}
	}
	if sw != nil {
		if err := s.act(jt, sw, next, act, now); err != nil {
			return err
		}
	}
	if next.empty() {
		return tx.Where("app = ? AND name = ?", app, name).Delete(&stateRow{}).Error
	}
	return tx.Clauses(clause.OnConflict{UpdateAll: true}).Create(&stateRow{
		App: app, Name: name, ExpiresAt: next.ExpiresAt, RemindedAt: next.RemindedAt, ExpiredAt: next.ExpiredAt, EscalatedAt: next.EscalatedAt,
	}).Error
}

// resolve resolves both expiry findings of target, saying why.
func resolve(tx *gorm.DB, target, why string, now time.Time) error {
	for _, k := range []finding.Kind{finding.ExpiryReminder, finding.ExpiredOn} {
		if _, err := finding.Resolve(tx, k, target, why, now); err != nil {
			return err
		}
	}
	return nil
}

// act carries out the reminder, expiry, escalation or turning off of sw.
func (s *Service) act(jt *server.JobTx, sw *server.Switch, next *State, act Action, now time.Time) error {
	tx := jt.DB()
	m := describe(sw, now, s.cfg)
	ev := func(kind notify.Kind, phase, title string) error {
		return notify.Enqueue(tx, notify.Event{
			Key: m.key + "/" + phase, Kind: kind, App: sw.App, Target: sw.Target(),
			Title: title, Body: m.body, Data: m.data(phase), At: now,
		})
	}
	spec := func(kind finding.Kind, severity, summary string) finding.Spec {
		return finding.Spec{Kind: kind, Target: sw.Target(), App: sw.App, Severity: severity, Summary: summary, Detail: m.body}
	}
	switch {
	case act.Remind:
		title := fmt.Sprintf("%s expires in %s: confirm (renew) or turn it off", m.name, m.left)
		if sw.ExpiryPolicy == server.ExpiryAutoOff {
			title = fmt.Sprintf("%s will be turned off in %s (auto_off): renew it to keep it on", m.name, m.left)
		}
		if _, err := finding.Open(tx, spec(finding.ExpiryReminder, finding.Info, title), now); err != nil {
			return err
		}
		return ev(notify.ExpiryReminder, "reminder", title)
	case act.Expire:
		if _, err := finding.Resolve(tx, finding.ExpiryReminder, sw.Target(), "it expired at "+m.exp+"; see the expired_on finding", now); err != nil {
			return err
		}
		title := fmt.Sprintf("%s on for %s — confirm or turn off (expired at %s)", m.name, m.onFor, m.exp)
		if _, err := finding.Open(tx, spec(finding.ExpiredOn, finding.Warning, title), now); err != nil {
			return err
		}
		return ev(notify.ExpiryReminder, "expired", title)
	case act.Escalate:
		title := fmt.Sprintf("Escalation: %s on for %s, %s past its expiry, and nobody confirmed or turned it off", m.name, m.onFor, OnFor(now.Sub(*next.ExpiredAt)))
		if _, err := finding.Open(tx, spec(finding.ExpiredOn, finding.Critical, title), now); err != nil {
			return err
		}
		return ev(notify.ExpiryEscalation, "escalation", title)
	case act.TurnOff:
		a := server.JobActor(audit.ActorExpiry, "expiry/"+sw.App+"/"+sw.Name)
		reason := fmt.Sprintf("on past its expiry at %s (max_on %s, policy auto_off)", m.exp, sw.MaxOn)
		version := sw.Version
		if _, err := jt.TurnOff(a, sw.App, sw.Name, server.Toggle{Reason: reason, Version: &version}); err != nil {
			return err
		}
		if err := resolve(tx, sw.Target(), "turned off by the expiry job at its expiry", now); err != nil {
			return err
		}
		return ev(notify.ExpiryTurnedOff, "turned_off", fmt.Sprintf("%s turned off by the expiry job after %s on (max_on %s, auto_off)", m.name, m.onFor, sw.MaxOn))
	}
	return nil
}

// message is how notifications and findings describe a switch's expiry.
type message struct {
	name, key, exp, onFor, left, body string
	sw                                *server.Switch
}

func describe(sw *server.Switch, now time.Time, cfg Config) message {
	exp := utc(sw.ExpiresAt)
	m := message{name: sw.App + "/" + sw.Name, sw: sw}
	m.key = fmt.Sprintf("expiry/%s/%s@%d", sw.App, sw.Name, exp.Unix())
	m.exp = exp.Format(time.RFC3339)
	m.left = OnFor(max(exp.Sub(now), 0))
	if sw.TurnedOnAt != nil {
		m.onFor = OnFor(now.Sub(*sw.TurnedOnAt))
	}
	owner := sw.Owner
	if owner == "" {
		owner = "nobody (no owner set)"
	}
	m.body = fmt.Sprintf("%s (%s %s) is on since %s, expiry %s (max_on %s, policy %s). Last change by %s: “%s”. Owner: %s.",
		m.name, sw.Level, sw.Level.Label(), stamp(sw.TurnedOnAt), m.exp, sw.MaxOn, sw.ExpiryPolicy, sw.UpdatedBy, sw.Reason, owner)
	if sw.Runbook != "" {
		m.body += " Runbook: " + sw.Runbook
	}
	return m
}

func (m message) data(phase string) map[string]any {
	return map[string]any{
		"phase": phase, "app": m.sw.App, "switch": m.sw.Name, "level": m.sw.Level, "owner": m.sw.Owner,
		"runbook": m.sw.Runbook, "on_since": utc(m.sw.TurnedOnAt), "expires_at": utc(m.sw.ExpiresAt),
		"max_on": m.sw.MaxOn, "policy": m.sw.ExpiryPolicy, "updated_by": m.sw.UpdatedBy, "reason": m.sw.Reason,
	}
}

func stamp(t *time.Time) string {
	if t == nil {
		return "—"
	}
	return t.UTC().Format(time.RFC3339)
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
