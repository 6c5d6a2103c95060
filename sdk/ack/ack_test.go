package ack

import (
	"testing"
	"time"
)

// TestSchedule drives the schedule with its own clock: one ack per quiet
// spell, covering every change of a burst; the delay drawn once per ack;
// changes that never stop acked after MaxWait, out of the fan-out of a
// change applied just then; and acks of one instance at least Gap apart.
func TestSchedule(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	const spread = 600 * time.Millisecond // the random part every test ack draws
	draws := 0
	s := &Schedule{Draw: func(max time.Duration) time.Duration {
		if max != Spread {
			t.Fatalf("drawn from [0, %v), want [0, Spread)", max)
		}
		draws++
		return spread
	}}
	delay := Quiet + spread
	due := func(unacked bool, appliedAt, want time.Time, what string) {
		t.Helper()
		if got := s.Due(unacked, appliedAt); !got.Equal(want) {
			t.Fatalf("%s: due %v after t0, want %v", what, got.Sub(t0), want.Sub(t0))
		}
	}

	due(false, t0, time.Time{}, "nothing unacked")
	due(true, ms(0), ms(0).Add(delay), "one change: quiet for the delay")
	for k := 1; k < 10; k++ {
		due(true, ms(200*k), ms(200*k).Add(delay), "a burst, a change every 200 ms: the ack moves with the last change")
	}
	if draws != 1 {
		t.Fatalf("%d delays drawn for one ack", draws)
	}
	// Changes that never stop: due MaxWait plus the random part after the
	// oldest change...
	waited := t0.Add(MaxWait + spread)
	due(true, ms(3000), waited, "changes without end")
	// ...but not inside the fan-out of a change applied just before that,
	// and Quiet later at the most.
	due(true, waited.Add(-100*time.Millisecond), waited.Add(Quiet-100*time.Millisecond), "a change 100 ms before the deadline")
	due(true, waited.Add(Quiet), waited.Add(Quiet), "a change past the deadline")

	// Written at 4 s: the next change starts a new ack with a new delay, due
	// no sooner than Gap after this one.
	s.Acked(ms(4000))
	due(true, ms(5000), ms(4000).Add(Gap), "a change 1 s after an ack")
	if draws != 2 {
		t.Fatalf("%d draws, want a new delay for the new ack", draws)
	}
	s.Acked(ms(7000))
	due(true, ms(11000), ms(11000).Add(delay), "a change 4 s after the ack")

	// Acked by another write (the revision is no longer unacked): reset.
	due(false, ms(11000), time.Time{}, "acked by a report")
	s.Due(true, ms(12000))
	if draws != 4 {
		t.Fatalf("%d draws, want a new delay for a new ack", draws)
	}
	// A new registration: no gap before the first ack.
	s.Acked(ms(12500))
	s.Registered()
	due(true, ms(13000), ms(13000).Add(delay), "the first change after a registration")
}

// TestScheduleFleet draws real delays for a fleet: one change is acked by
// every instance between Quiet and Quiet+Spread after it; changes every
// second for a minute cost each instance at most one ack per Gap.
func TestScheduleFleet(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	for i := 0; i < 1000; i++ {
		var s Schedule
		d := s.Due(true, t0).Sub(t0)
		if d < Quiet || d >= Quiet+Spread {
			t.Fatalf("one change acked %v after it", d)
		}
	}
	const n = 200
	acks := 0
	for i := 0; i < n; i++ {
		var s Schedule
		var prev time.Time
		applied := t0
		unacked := true
		for now := t0; now.Before(t0.Add(time.Minute)); now = now.Add(10 * time.Millisecond) {
			if now.Sub(t0)%time.Second == 0 {
				applied, unacked = now, true
			}
			if due := s.Due(unacked, applied); !due.IsZero() && !now.Before(due) {
				if !prev.IsZero() && now.Sub(prev) < Gap {
					t.Fatalf("acks %v apart", now.Sub(prev))
				}
				s.Acked(now)
				prev, unacked = now, false
				acks++
			}
		}
	}
	if perInstance := float64(acks) / n; perInstance > 60/Gap.Seconds() {
		t.Errorf("%.1f acks per instance in a minute, want at most %.0f", perInstance, 60/Gap.Seconds())
	}
}
