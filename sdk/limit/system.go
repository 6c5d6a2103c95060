package limit

import (
	"math"
	"sync/atomic"
	"time"

	"github.com/switchyard-io/switchyard/sdk/wire"
)

// System protection defaults.
const (
	DefaultSystemCPU      = 0.8
	DefaultSystemWindow   = 10 * time.Second
	DefaultSystemCooldown = time.Second
	// systemBuckets divides the window (Kratos' BBR uses 100 of 100 ms).
	systemBuckets = 100
)

// CPUSource reports the CPU usage of the process' container (or host) as a
// share of what it may use, 0–1. CPUMeter is the real one.
type CPUSource interface {
	CPUUsage() float64
}

// System is adaptive system protection (Kratos' BBR, Sentinel's system
// rules): it rejects inbound work only when both
//
//   - the CPU usage (cgroup-aware, from a CPUSource) is at or above the
//     threshold, or was within the cooldown after the last rejection, and
//   - the requests in flight exceed what the service has shown it can
//     finish: max completions per bucket × buckets per second × min mean
//     latency over the window (Little's law, L = λ·W), at least 1.
//
// So a host saturated by something else stops taking more work than it
// can finish, while a busy but healthy service is left alone. The latency
// and throughput figures come from the requests' own permits; a window with
// no completed request bounds in-flight work to 1 while the CPU is high.
//
// Admit takes no lock and allocates nothing; the bound is recomputed at
// most once per bucket, and only while the CPU is high.
type System struct {
	clock    Clock
	cpu      CPUSource
	p        atomic.Pointer[systemParams]
	ring     atomic.Pointer[Rolling] // counter 0: completions, 1: latency sum (ns)
	inflight atomic.Int64
	dropAt   atomic.Int64 // clock reading of the last rejection, 0: none
	bound    atomic.Uint64
}

type systemParams struct {
	cpu      float64
	cooldown int64
	window   time.Duration
	reserve  float64
}

// NewSystem returns system protection reading cpu; a threshold outside
// (0, 1], a window of 0 or a negative cooldown take the defaults. A nil
// clock means SystemClock.
func NewSystem(threshold float64, window, cooldown time.Duration, cpu CPUSource, clock Clock) *System {
	s := &System{clock: orSystem(clock), cpu: cpu}
	s.set(threshold, window, cooldown)
	return s
}

func (s *System) set(threshold float64, window, cooldown time.Duration) {
	if !(threshold > 0 && threshold <= 1) {
		threshold = DefaultSystemCPU
	}
	if window <= 0 {
		window = DefaultSystemWindow
	}
	if cooldown <= 0 {
		cooldown = DefaultSystemCooldown
	}
	old := s.p.Load()
	np := &systemParams{cpu: threshold, cooldown: int64(cooldown), window: window}
	if old != nil {
		np.reserve = old.reserve
	}
	s.p.Store(np)
	if old == nil || old.window != window {
		s.ring.Store(NewStripedRolling(window/systemBuckets, systemBuckets, 1))
		s.bound.Store(0)
	}
}

// SetReserve scales the in-flight bound of lower criticalities by
// Criticality.Share(reserve).
func (s *System) SetReserve(reserve float64) {
	np := *s.p.Load()
	np.reserve = reserve
	s.p.Store(&np)
}

// Admit implements Limiter (reason overloaded).
func (s *System) Admit() (Permit, Decision) { return s.AdmitAs(Critical) }

// AdmitAs implements Limiter: lower criticalities see the in-flight bound
// scaled by their share (see SetReserve).
func (s *System) AdmitAs(c Criticality) (Permit, Decision) {
	now := s.clock.Nanotime()
	if s.shouldDrop(now, c) {
		return Permit{}, Decision{Reason: ReasonOverloaded, RetryAfter: time.Duration(s.p.Load().cooldown)}
	}
	s.inflight.Add(1)
	return Permit{r: s, start: now}, Decision{OK: true}
}

func (s *System) shouldDrop(now int64, c Criticality) bool {
	p := s.p.Load()
	if s.cpu.CPUUsage() < p.cpu {
		at := s.dropAt.Load()
		if at == 0 {
			return false
		}
		if now-at > p.cooldown {
			s.dropAt.CompareAndSwap(at, 0)
			return false
		}
	}
	inflight := s.inflight.Load()
	limit := s.MaxInFlight()
	if c != Critical && p.reserve > 0 {
		limit = max(int64(float64(limit)*c.Share(p.reserve)), 1)
	}
	if inflight < 1 || inflight < limit {
		return false
	}
	s.dropAt.Store(now)
	return true
}

// MaxInFlight is the current Little's-law bound: the largest completions
// of a finished bucket in the window, per second, times the lowest mean
// latency of one, rounded up; 1 when nothing completed.
func (s *System) MaxInFlight() int64 {
	r := s.ring.Load()
	now := s.clock.Nanotime()
	idx := uint64(now / r.width)
	if b := s.bound.Load(); b>>32 == idx&math.MaxUint32 && b != 0 {
		return int64(b & math.MaxUint32)
	}
	var maxPass, minRT int64
	r.eachPast(now, func(c [3]int64) {
		if c[0] == 0 {
			return
		}
		maxPass = max(maxPass, c[0])
		if rt := c[1] / c[0]; minRT == 0 || rt < minRT {
			minRT = max(rt, 1)
		}
	})
	bound := int64(1)
	if maxPass > 0 {
		perSecond := float64(maxPass) * float64(time.Second) / float64(r.width)
		bound = max(int64(math.Ceil(perSecond*float64(minRT)/float64(time.Second))), 1)
	}
	bound = min(bound, math.MaxUint32)
	s.bound.Store((idx&math.MaxUint32)<<32 | uint64(bound))
	return bound
}

// InFlight reports the admitted requests not yet finished.
func (s *System) InFlight() int64 { return s.inflight.Load() }

// Kind implements Limiter.
func (s *System) Kind() string { return wire.KindSystem }

func (s *System) update(r *wire.LimitRule) {
	s.set(r.CPU, r.Window.D(), r.Cooldown.D())
	s.SetReserve(r.Reserve)
}

func (s *System) release(p Permit, failed bool) {
	now := s.clock.Nanotime()
	s.inflight.Add(-1)
	if !failed {
		s.ring.Load().Add3(now, 1, now-p.start, 0)
	}
}

func (s *System) isFailure(err error) bool { return err != nil }
