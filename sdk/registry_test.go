package sdk

import (
	"testing"
	"time"
)

// TestAckSchedule drives the ack schedule with its own clock: one ack per
// quiet spell, covering every change of a burst; the delay drawn once per
// ack; and flips that never stop acked after ackMaxWait plus the same
// random part.
func TestAckSchedule(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	const spread = 600 * time.Millisecond // the random part every test ack draws
	draws := 0
	a := &acker{draw: func(max time.Duration) time.Duration {
		if max != ackSpread {
			t.Fatalf("drawn from [0, %v), want [0, ackSpread)", max)
		}
		draws++
		return spread
	}}
	delay := debounceMin + spread

	if due := a.due(false, t0); !due.IsZero() {
		t.Fatalf("nothing unacked: due %v", due)
	}
	// One change: acked once it has been quiet for the delay.
	if due := a.due(true, ms(0)); !due.Equal(ms(0).Add(delay)) {
		t.Fatalf("one change: due %v after it, want %v", due.Sub(t0), delay)
	}
	// A burst, a change every 200 ms: the ack moves with the last change,
	// the delay drawn once.
	for k := 1; k < 10; k++ {
		if due := a.due(true, ms(200*k)); !due.Equal(ms(200 * k).Add(delay)) {
			t.Fatalf("change %d of a burst: due %v after the first, want %v", k, due.Sub(t0), ms(200*k).Add(delay).Sub(t0))
		}
	}
	if draws != 1 {
		t.Fatalf("%d delays drawn for one ack", draws)
	}
	// Changes that never stop: the ack is due ackMaxWait plus the random
	// part after the oldest change it covers.
	if due, want := a.due(true, ms(4000)), t0.Add(ackMaxWait+spread); !due.Equal(want) {
		t.Fatalf("changes without end: due %v after the first, want %v", due.Sub(t0), want.Sub(t0))
	}
	// Written: the next change starts a new ack with a new delay.
	a.acked()
	if due := a.due(true, ms(5000)); !due.Equal(ms(5000).Add(delay)) || draws != 2 {
		t.Fatalf("after an ack: due %v after the change, %d draws", due.Sub(ms(5000)), draws)
	}
	// Acked by another write (the revision is no longer unacked): reset.
	a.due(false, ms(5000))
	if a.due(true, ms(9000)); draws != 3 {
		t.Fatalf("%d draws, want a new delay for a new ack", draws)
	}
}
