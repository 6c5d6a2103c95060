package sdk

import (
	"sync/atomic"

	"github.com/switchyard-io/switchyard/sdk/wire"
)

// An L4 (read_only) switch with a warm_up does not let every write back
// at once when it turns off: from the moment this instance applies the
// off, the share of writes let through is (time since the off) / warm_up,
// rising linearly from 0 to 1; the others still get the L4 answer (503
// read_only). The backend that was protected sees its write
// traffic ramp back instead of arriving as a step, retries included.
//
// The cost when no warm-up is in progress is one atomic load per write
// (Client.warmUntil); reads never pay anything.

// warmAfter starts or carries the warm-up of e, the entry that follows
// old for the same name, at clock reading now. It reports the clock
// reading at which a warm-up it starts ends, and whether it started one.
func (e *entry) warmAfter(old *entry, now int64) (end int64, started bool) {
	if e.sw == nil || e.sw.Level != wire.L4 || e.sw.WarmUp <= 0 || e.gate {
		return 0, false // no warm-up, or on again: the L4 answer holds
	}
	if old.wasOnHere() {
		e.warming, e.warmFrom = true, now
		return now + int64(e.sw.WarmUp), true
	}
	// Still off: a warm-up in progress goes on (its end is already in
	// Client.warmUntil).
	e.warming, e.warmFrom = old.warming, old.warmFrom
	return 0, false
}

// wasOnHere reports whether the entry's switch was on for some request of
// this instance: on for it, or on by request key.
func (e *entry) wasOnHere() bool { return e.gate && (e.on || !e.fixed) }

// heldBack reports whether a write is held back by the warm-up of an L4
// switch of the guard that turned off: each one in progress lets it
// through with the share of its warm_up that has passed.
func (g *Guard) heldBack() bool {
	until := g.c.warmUntil.Load()
	if until == 0 {
		return false
	}
	now := g.c.clock.Nanotime()
	if now >= until {
		g.c.warmUntil.CompareAndSwap(until, 0) // every warm-up is over
		return false
	}
	for _, s := range g.switches {
		e := s.entry()
		if e == nil || !e.warming || e.sw.Level != wire.L4 {
			continue
		}
		if passed, d := now-e.warmFrom, int64(e.sw.WarmUp); passed < d && !g.c.warmPass(float64(passed)/float64(d)) {
			return true
		}
	}
	return false
}

// WarmingUp reports whether the switch, an L4 switch with a warm_up that
// turned off, is still letting writes back in, and the share of them a
// Guard lets through now.
func (h *Handle) WarmingUp() (share float64, warming bool) {
	e := h.entry()
	if e == nil || !e.warming || e.gate {
		return 1, false
	}
	passed, d := h.c.clock.Nanotime()-e.warmFrom, int64(e.sw.WarmUp)
	if passed >= d {
		return 1, false
	}
	return float64(passed) / float64(d), true
}

// warmPass decides one write of a warm-up letting share (0 ≤ share < 1)
// of them through. The writes are spread evenly rather than at random:
// the n-th decision of the client takes the fractional part of n·φ (the
// golden ratio, in 64-bit fixed point), a sequence that fills [0, 1)
// evenly, so the share holds over a second's few writes as well as over
// many.
func (c *Client) warmPass(share float64) bool {
	x := c.warmSeq.Add(1) * 0x9E3779B97F4A7C15
	return float64(x) < share*(1<<64)
}

// maxInt64 raises v to at least x.
func maxInt64(v *atomic.Int64, x int64) {
	for {
		cur := v.Load()
		if cur >= x || v.CompareAndSwap(cur, x) {
			return
		}
	}
}
