// Package ack is the schedule on which an SDK instance acknowledges the
// etcd revision it applied: the applied_revision written on its instance
// key, which the console's fleet model counts as "applied by N/M" for
// rollout gates and drills. The SDK's registry follows it, and so does the
// fleet simulator behind server/fleet's BenchmarkScale, so the benchmark
// measures the schedule the SDK runs.
//
// Every ack is an etcd write, and etcd applies writes on the same server
// that fans the next change out to every watcher. So an instance acks:
//
//   - once its applied revision has been quiet for its delay — Quiet plus
//     a random part of up to Spread, drawn once per ack — so one ack covers
//     every revision applied while it waited, and a fleet of N writes the
//     acks of a flip at about N/Spread a second;
//   - no sooner than Gap after its previous ack, so however often changes
//     come the fleet writes at most N/Gap acks a second;
//   - never within Quiet of a change it just applied (that change's
//     fan-out to the rest of the fleet), except
//   - at the latest MaxWait plus its delay after the oldest change the ack
//     covers, so changes that never stop still get acked.
//
// The package imports the standard library only. Time is an argument.
package ack

import (
	"math/rand/v2"
	"time"
)

const (
	// Quiet is the least time an ack waits after the last change it
	// covers, and the time it keeps out of a change's fan-out.
	Quiet = 250 * time.Millisecond
	// Spread is the range of the random part of an ack's delay.
	Spread = 1500 * time.Millisecond
	// Gap is the least time between two acks of one instance.
	Gap = 3 * time.Second
	// MaxWait bounds how long a stream of changes can put an ack off.
	MaxWait = 3 * time.Second
)

// Schedule is the ack schedule of one instance. The zero value is ready;
// it is not safe for concurrent use.
type Schedule struct {
	// Draw returns the random part of a delay in [0, max); nil: uniform.
	Draw func(max time.Duration) time.Duration

	since time.Time     // when the oldest unacked change was applied; zero: none
	delay time.Duration // quiet time this ack waits for
	last  time.Time     // when the previous ack was written; zero: none since registering
}

// Due returns when to ack the applied revision, given whether it is
// unacked and when the last change was applied; zero when there is
// nothing to ack. The first call that finds it unacked draws the delay.
func (s *Schedule) Due(unacked bool, appliedAt time.Time) time.Time {
	if !unacked {
		s.since = time.Time{}
		return time.Time{}
	}
	if s.since.IsZero() {
		draw := s.Draw
		if draw == nil {
			draw = rand.N[time.Duration]
		}
		s.since, s.delay = appliedAt, Quiet+draw(Spread)
	}
	// appliedAt+delay is past the fan-out already (delay >= Quiet).
	due := appliedAt.Add(s.delay)
	if !s.last.IsZero() {
		due = latest(due, s.last.Add(Gap))
	}
	waited := s.since.Add(MaxWait + s.delay - Quiet)
	if fanOut := appliedAt.Add(Quiet); waited.Before(fanOut) {
		waited = earliest(fanOut, waited.Add(Quiet))
	}
	return earliest(due, waited)
}

// Acked records that an ack was written at: a change applied since starts
// a new ack, with a new delay, due no sooner than Gap after at.
func (s *Schedule) Acked(at time.Time) { s.since, s.last = time.Time{}, at }

// Registered records that a new registration wrote the instance key: it
// carries the applied revision, and the first ack after it waits for no
// Gap.
func (s *Schedule) Registered() { s.since, s.last = time.Time{}, time.Time{} }

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
