package drill

import (
	"time"
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
		next := p.sched.Next(t.In(p.loc))
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
	return p.sched.Next(t.In(p.loc)).UTC()
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
