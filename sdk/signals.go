package sdk

import (
	"context"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/switchyard-io/switchyard/sdk/wire"
)

// This file holds the fleet signals the hot path records: per switch name,
// counters that live as long as the client (so they survive snapshot
// swaps) and that the reporter (report.go) reads off the hot path.

// cacheLine is the unit the signals are padded to, so that the counters of
// one switch never share a cache line with another switch's, nor with the
// read flag every check of the switch loads.
const cacheLine = 64

// latencyBuckets is the length of a degraded-path histogram: one bucket
// per bound of wire.LatencyBuckets and one above them (TestLatencyBuckets
// keeps the two in step).
const latencyBuckets = 12

// switchSignals are the signals of one switch name. The hot path writes
// them; the reporter reads them.
//
// A not-degraded answer only loads read (see Handle.On): the first such
// answer after the reporter cleared it stores 1, and every other one sees
// 1 and writes nothing, so the check stays a load and a predictable branch.
// A degraded answer is one atomic add to degraded.
type switchSignals struct {
	// read is 1 once the switch was checked since the reporter last took
	// it; accessed with atomic.LoadUint32/StoreUint32 only.
	read   uint32
	name   string
	verify atomic.Pointer[verifySignals] // shadow verification (verify.go), nil until first sampled
	_      [cacheLine - 4 - 4 - unsafe.Sizeof("") - 8]byte

	degraded  stripedCounter // checks answered on
	fallbacks atomic.Uint64  // L1 values served by Handle.Fallback
	served    atomic.Uint64  // answers without any published value (Instance.Stats)
	latency   [latencyBuckets]atomic.Uint64
	_         [cacheLine - (2+latencyBuckets)*8%cacheLine]byte
}

// stripes is how many cache lines a degraded counter is spread over.
const stripes = 4

// stripedCounter is a counter that many goroutines add to at once — every
// request to a switch that is on — spread over cache-line-padded stripes,
// so cores do not fight over one line. An add picks its stripe from the
// address of the calling goroutine's stack: free to compute, the same for
// one goroutine (its line stays in its core's cache), different across
// goroutines. Load sums the stripes.
type stripedCounter struct {
	s [stripes]struct {
		n atomic.Uint64
		_ [cacheLine - 8]byte
	}
}

// Add adds n.
func (c *stripedCounter) Add(n uint64) {
	var here byte
	c.s[stripeOf(uintptr(unsafe.Pointer(&here)))].n.Add(n)
}

// stripeOf picks the stripe of a goroutine from an address on its stack.
// Goroutine stacks start 2 KiB large and are handed out side by side:
// the bits above 2 KiB are mixed (Fibonacci hashing), so neighbouring
// goroutines land on different stripes.
func stripeOf(stackAddr uintptr) uint64 {
	return uint64(stackAddr>>11) * 0x9E3779B97F4A7C15 >> 62 % stripes
}

// Load returns the sum.
func (c *stripedCounter) Load() uint64 {
	var n uint64
	for i := range c.s {
		n += c.s[i].n.Load()
	}
	return n
}

// A switchSignals spans whole cache lines: the allocator places an object
// of this size class on a multiple of its size, hence of cacheLine.
var _ [0]struct{} = [unsafe.Sizeof(switchSignals{}) % cacheLine]struct{}{}

func newSwitchSignals(name string) *switchSignals { return &switchSignals{name: name} }

// count records one answer of the switch and returns it.
func (s *switchSignals) count(on bool) bool {
	if on {
		s.degraded.Add(1)
	} else if atomic.LoadUint32(&s.read) == 0 {
		s.markRead()
	}
	return on
}

// markRead sets the read flag, unless a degraded run of the switch is in
// flight (verify.go): then every check must keep reaching slowOn. Setting
// the flag before looking at the runs means a run that starts meanwhile
// always finds or leaves the flag cleared.
func (s *switchSignals) markRead() {
	atomic.StoreUint32(&s.read, 1)
	if s.shadowing() {
		atomic.StoreUint32(&s.read, 0)
	}
}

// shadowing reports whether a degraded run of the switch is in flight.
func (s *switchSignals) shadowing() bool {
	v := s.verify.Load()
	return v != nil && v.inflight.Load() > 0
}

// verified reports whether ctx belongs to a degraded run of the switch,
// which answers on. It costs one atomic load for a switch never sampled.
func (s *switchSignals) verified(ctx context.Context) bool {
	return s.shadowing() && verifying(ctx, s)
}

// verifyState returns the switch's verification state, made on first use.
func (s *switchSignals) verifyState() *verifySignals {
	if v := s.verify.Load(); v != nil {
		return v
	}
	s.verify.CompareAndSwap(nil, &verifySignals{})
	return s.verify.Load()
}

// takeRead reports whether the switch was checked (not degraded) since
// the last call, and clears the flag. It writes only when the flag is set,
// so switches nobody checks cost their readers nothing.
func (s *switchSignals) takeRead() bool {
	if atomic.LoadUint32(&s.read) == 0 {
		return false
	}
	atomic.StoreUint32(&s.read, 0)
	return true
}

// observe records the latency of a request the middleware served degraded
// with this switch on.
func (s *switchSignals) observe(d time.Duration) {
	s.latency[latencyBucket(d)].Add(1)
}

// latencyBucket is the histogram bucket of d: the first bound it does not
// exceed, or the last bucket.
func latencyBucket(d time.Duration) int {
	for i, b := range wire.LatencyBuckets {
		if d <= b {
			return i
		}
	}
	return len(wire.LatencyBuckets)
}

// signal reads the counters (LastRead is the reporter's to fill in).
// Latency is nil when no degraded request was timed.
func (s *switchSignals) signal() wire.SwitchSignal {
	sig := wire.SwitchSignal{Degraded: s.degraded.Load(), Fallbacks: s.fallbacks.Load()}
	if v := s.verify.Load(); v != nil {
		sig.Verify = v.signal()
	}
	for i := range s.latency {
		if n := s.latency[i].Load(); n > 0 {
			if sig.Latency == nil {
				sig.Latency = make([]uint64, latencyBuckets)
			}
			sig.Latency[i] = n
		}
	}
	return sig
}
