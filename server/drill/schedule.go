package drill

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/robfig/cron/v3"
	"gorm.io/gorm"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/internal/oneline"
	"github.com/switchyard-io/switchyard/server"
)

// maxMissedScan bounds how many cron times one step walks through: a
// schedule every minute and a console down for a month is 43,200 missed
// times, recorded as one missed run that counts them.
const maxMissedScan = 100_000

// due is what a drill's schedule asks for at now, given the newest cron
// time already dealt with (last).
type due struct {
	// Start is the cron time to run now (zero: none).
	Start time.Time
	// Missed are the cron times that passed while no leader could run
	// them, oldest first, at most the first and the last (Count says how
	// many there were).
	Missed      []time.Time
	MissedCount int
	// Last is the new newest cron time dealt with.
	Last time.Time
}

// dueAt computes the runs a schedule owes at now: every cron time after
// last and not after now is either the run to start (the newest one, when
// it is at most deadline old) or missed. A drill never runs late beyond its
// starting deadline and never runs twice for one cron time.
func dueAt(p *plan, last, now time.Time) due {
	out := due{Last: last}
	if p.sched == nil || !p.enabled {
		return out
	}
	var (
		n                   int
		first, prev, newest time.Time
	)
	for t := last; n < maxMissedScan; n++ {
		next := p.sched.Next(t)
		if next.IsZero() || next.After(now) {
			break
		}
		if n == 0 {
			first = next.UTC()
		}
		prev, newest, t = newest, next.UTC(), next
	}
	if n == 0 {
		return out
	}
	out.Last = newest
	lastMissed := newest
	if now.Sub(newest) <= p.startingDeadline {
		out.Start, lastMissed = newest, prev
		n--
	}
	out.MissedCount = n
	switch {
	case n == 1:
		out.Missed = []time.Time{lastMissed}
	case n > 1:
		out.Missed = []time.Time{first, lastMissed}
	}
	return out
}

// next is the schedule's next cron time after t (zero: none).
func (p *plan) next(t time.Time) time.Time {
	if p.sched == nil || !p.enabled {
		return time.Time{}
	}
	return p.sched.Next(t).UTC()
}

// blackoutAt returns the blackout window t falls in ("" when none).
func (p *plan) blackoutAt(t time.Time) string {
	for _, b := range p.blackouts {
		if b.sched == nil {
			if !t.Before(b.start) && t.Before(b.end) {
				return b.text
			}
			continue
		}
		// The newest window start at or before t: the next start after
		// t - length, if any, at or before t.
		if start := b.sched.Next(t.Add(-b.length).In(p.loc)); !start.IsZero() && !start.After(t) {
			return b.text
		}
	}
	return ""
}

// zoned is a drill's cron schedule read in its time zone, with daylight
// saving handled as vixie cron does: a local time that occurs twice (the
// hour repeated when clocks go back) runs once, at its first occurrence; a
// local time that does not occur (the hour skipped when clocks go forward)
// runs right after the jump. Fixed-interval schedules (@every) count real
// time.
type zoned struct {
	spec cron.Schedule
	loc  *time.Location
}

// Next returns the schedule's first time after t (zero: none).
func (z zoned) Next(t time.Time) time.Time {
	if _, ok := z.spec.(*cron.SpecSchedule); !ok {
		return z.spec.Next(t.UTC()).UTC()
	}
	// Walk the local wall clock (as if it were UTC, which has no daylight
	// saving), then find the real instant of each wall time.
	wall := wallClock(t.In(z.loc))
	for range 4 {
		next := z.spec.Next(wall)
		if next.IsZero() {
			return time.Time{}
		}
		if at := z.instant(next, t); !at.IsZero() {
			return at
		}
		wall = next
	}
	return time.Time{}
}

// instant is the first real instant after t whose local wall clock reads
// wall; when the wall time is skipped by a jump forward, the instant of
// the jump. Zero: none after t.
func (z zoned) instant(wall, t time.Time) time.Time {
	// Within a day either side there is at most one change of offset.
	before, after := offsetAt(wall.Add(-24*time.Hour), z.loc), offsetAt(wall.Add(24*time.Hour), z.loc)
	var first time.Time
	for _, off := range []time.Duration{before, after} {
		at := wall.Add(-off)
		if wallClock(at.In(z.loc)).Equal(wall) && at.After(t) && (first.IsZero() || at.Before(first)) {
			first = at
		}
	}
	if !first.IsZero() || before == after {
		return first
	}
	// Skipped: the jump lies between the two readings of wall.
	lo, hi := wall.Add(-after), wall.Add(-before)
	if hi.Before(lo) {
		return time.Time{} // both readings exist (clocks went back): handled above
	}
	for hi.Sub(lo) > time.Second {
		mid := lo.Add(hi.Sub(lo) / 2).Truncate(time.Second)
		if offsetAt(mid, z.loc) == after {
			hi = mid
		} else {
			lo = mid
		}
	}
	if !hi.After(t) {
		return time.Time{}
	}
	return hi
}

// wallClock is t's wall clock reading as a UTC time.
func wallClock(t time.Time) time.Time {
	y, mo, d := t.Date()
	h, mi, s := t.Clock()
	return time.Date(y, mo, d, h, mi, s, 0, time.UTC)
}

func offsetAt(t time.Time, loc *time.Location) time.Duration {
	_, off := t.In(loc).Zone()
	return time.Duration(off) * time.Second
}

// minGap is the shortest time between two consecutive runs of a schedule
// (zero: it never runs twice), looked for over its first 1,000 runs after
// from, on the local wall clock (a jump forward may bring one pair of
// runs closer; an overlapping run is refused then).
func minGap(s cron.Schedule, from time.Time) time.Duration {
	if c, ok := s.(cron.ConstantDelaySchedule); ok {
		return c.Delay
	}
	var gap time.Duration
	prev := s.Next(from)
	for range 1000 {
		if prev.IsZero() {
			break
		}
		next := s.Next(prev)
		if next.IsZero() {
			break
		}
		if d := next.Sub(prev); gap == 0 || d < gap {
			gap = d
		}
		prev = next
	}
	return gap
}

// schedule records the runs the drills' schedules owe at now.
func (j *Job) schedule(ctx context.Context, t server.Term, now time.Time) error {
	var drills []Drill
	if err := j.s.db.WithContext(ctx).Where("enabled = ?", true).Order("id").Find(&drills).Error; err != nil {
		return fmt.Errorf("drill: read drills: %w", err)
	}
	var errs []error
	for i := range drills {
		d := &drills[i]
		sp, err := d.spec()
		if err != nil || sp.Schedule == "" {
			continue
		}
		pl, err := sp.compile()
		if err != nil {
			continue
		}
		last := d.CreatedAt
		if d.LastScheduledAt != nil {
			last = *d.LastScheduledAt
		}
		du := dueAt(pl, last, now)
		if du.Last.Equal(last) {
			continue
		}
		_, err = j.s.cfg.Service.InTerm(ctx, t, func(tx *server.JobTx) error { return j.fire(tx, d, pl, du, last, now) })
		if err != nil {
			if errors.Is(err, server.ErrNotLeader) {
				return err
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// fire records what one drill's schedule owes: a missed run for the cron
// times that passed unrun, and the run due now — refused at once when it
// would overlap the drill's run in progress. Refused and missed runs in a
// row coalesce into the drill's newest run when that is one of the same
// kind (see coalesce).
func (j *Job) fire(tx *server.JobTx, d *Drill, pl *plan, du due, last, now time.Time) error {
	db := tx.DB()
	res := db.Model(&Drill{}).Where("id = ? AND (last_scheduled_at IS NULL OR last_scheduled_at = ?)", d.ID, last).
		Update("last_scheduled_at", du.Last)
	if res.Error != nil || res.RowsAffected == 0 {
		return res.Error // changed meanwhile: the next step sees the new schedule
	}
	if du.MissedCount > 0 {
		why := fmt.Sprintf("no console led within the starting deadline (%s) of it", server.ShortDuration(pl.startingDeadline))
		err := j.coalesce(db, d, OutcomeMissed, nil, du.Missed[0], du.Missed[len(du.Missed)-1], du.MissedCount, now,
			func(n int, span string) string {
				return fmt.Sprintf("missed %d scheduled run(s), %s: %s", n, span, why)
			})
		if err != nil {
			return err
		}
	}
	if du.Start.IsZero() {
		return nil
	}
	open, err := openRun(db, d.App, d.Name)
	if err != nil {
		return err
	}
	if open != nil {
		return j.coalesce(db, d, OutcomeRefused, open, du.Start, du.Start, 1, now, func(n int, span string) string {
			if n == 1 {
				return fmt.Sprintf("refused: the run scheduled for %s overlaps run #%d, still %s", stamp(du.Start), open.Number, open.Phase)
			}
			return fmt.Sprintf("refused %d scheduled runs, %s: each overlapped run #%d, still %s", n, span, open.Number, open.Phase)
		})
	}
	r, err := newRun(db, d, now)
	if err != nil {
		return err
	}
	start := du.Start
	r.ScheduledFor, r.StartedVia, r.StartedBy, r.StartedByKind = &start, ViaSchedule, "schedule", audit.ActorDrill
	return db.Create(r).Error
}

// coalesce records n cron times from first to last that end as outcome
// without running (missed, or refused as overlapping the run open): added
// to the drill's newest run when that is a scheduled one of the same
// outcome (and, for a refusal, made while the same run was open), else as
// a new finished run. summary says it for the total and its span.
func (j *Job) coalesce(db *gorm.DB, d *Drill, outcome string, open *Run, first, last time.Time, n int, now time.Time, summary func(n int, span string) string) error {
	var prev Run
	err := db.Where("app = ? AND drill = ?", d.App, d.Name).Order("number DESC").Limit(1).Take(&prev).Error
	if err != nil && !errors.Is(err, gorm.ErrRecordNotFound) {
		return err
	}
	same := err == nil && prev.Outcome == outcome && prev.StartedVia == ViaSchedule && prev.ScheduledFor != nil &&
		(open == nil || (prev.Number > open.Number && !prev.CreatedAt.Before(open.CreatedAt)))
	if same {
		total := max(prev.Count, 1) + n
		return db.Model(&Run{}).Where("id = ?", prev.ID).Updates(map[string]any{
			"count": total, "last_scheduled_for": last, "finished_at": now,
			"summary": oneline.Clean(summary(total, span(*prev.ScheduledFor, last)), maxReason),
		}).Error
	}
	r, err := newRun(db, d, now)
	if err != nil {
		return err
	}
	r.ScheduledFor, r.StartedVia, r.StartedBy, r.StartedByKind = &first, ViaSchedule, "schedule", audit.ActorDrill
	r.Count, r.Summary = n, oneline.Clean(summary(n, span(first, last)), maxReason)
	if n > 1 || !last.Equal(first) {
		r.LastScheduledFor = &last
	}
	closeAt(r, outcome, now)
	return db.Create(r).Error
}

// span says the cron times from first to last.
func span(first, last time.Time) string {
	if first.Equal(last) {
		return "at " + stamp(first)
	}
	return "from " + stamp(first) + " to " + stamp(last)
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") }
