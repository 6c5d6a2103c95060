package limit_test

import (
	"math"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/sdk/limit"
)

// fakeCPU is a CPU source the test sets.
type fakeCPU struct{ v atomic.Uint64 }

func (f *fakeCPU) set(u float64)     { f.v.Store(math.Float64bits(u)) }
func (f *fakeCPU) CPUUsage() float64 { return math.Float64frombits(f.v.Load()) }

// serve runs n requests of latency lat through s, one after another in
// each bucket of 100 ms for d, so the window learns the throughput and the
// latency.
func serve(t *testing.T, s *limit.System, clock *limit.FakeClock, perBucket int, lat, d time.Duration) {
	t.Helper()
	for elapsed := time.Duration(0); elapsed < d; elapsed += 100 * time.Millisecond {
		for range perBucket {
			p, dec := s.Admit()
			if !dec.OK {
				t.Fatalf("warm-up request rejected: %+v", dec)
			}
			clock.Advance(lat)
			p.Done(nil)
		}
		clock.Advance(100*time.Millisecond - time.Duration(perBucket)*lat)
	}
}

func TestSystemMaxInFlightIsLittlesLaw(t *testing.T) {
	clock := limit.NewFakeClock()
	s := limit.NewSystem(0.8, 10*time.Second, time.Second, &fakeCPU{}, clock)
	// 10 completions per 100 ms bucket (100/s) at 10 ms each: L = 1.
	serve(t, s, clock, 10, 10*time.Millisecond, 2*time.Second)
	if got := s.MaxInFlight(); got != 1 {
		t.Fatalf("MaxInFlight = %d, want 100/s × 10 ms = 1", got)
	}
	// The bound takes the best throughput and the best latency of the
	// window, each from its own bucket: 40 per bucket (400/s) × 2 ms = 0.8,
	// rounded up.
	serve(t, s, clock, 40, 2*time.Millisecond, time.Second)
	if got := s.MaxInFlight(); got != 1 {
		t.Fatalf("MaxInFlight = %d, want ceil(400/s × 2 ms) = 1", got)
	}
}

func TestSystemRejectsUnderHighCPUThenRecovers(t *testing.T) {
	clock := limit.NewFakeClock()
	cpu := &fakeCPU{}
	s := limit.NewSystem(0.8, 10*time.Second, time.Second, cpu, clock)
	// Every 100 ms bucket: 20 requests in parallel, each taking 20 ms.
	for range 20 {
		var ps []limit.Permit
		for range 20 {
			p, _ := s.Admit()
			ps = append(ps, p)
		}
		clock.Advance(20 * time.Millisecond)
		for _, p := range ps {
			p.Done(nil)
		}
		clock.Advance(80 * time.Millisecond)
	}
	// 20 per bucket = 200/s, latency 20 ms: bound 4.
	if got := s.MaxInFlight(); got != 4 {
		t.Fatalf("MaxInFlight = %d, want 200/s × 20 ms = 4", got)
	}

	// CPU low: in-flight work far above the bound is admitted.
	var held []limit.Permit
	for i := range 50 {
		p, d := s.Admit()
		if !d.OK {
			t.Fatalf("request %d rejected while the CPU is low: %+v", i, d)
		}
		held = append(held, p)
	}
	for _, p := range held {
		p.Done(nil)
	}
	held = held[:0]

	// CPU high: admitted until 4 are in flight, then overloaded.
	cpu.set(0.95)
	for i := range 4 {
		p, d := s.Admit()
		if !d.OK {
			t.Fatalf("request %d of 4 rejected: %+v", i, d)
		}
		held = append(held, p)
	}
	_, d := s.Admit()
	if d.OK || d.Reason != limit.ReasonOverloaded {
		t.Fatalf("5th request with CPU at 95 %% = %+v, want overloaded", d)
	}

	// CPU falls: during the cooldown the in-flight check still holds.
	cpu.set(0.3)
	clock.Advance(500 * time.Millisecond)
	if _, d := s.Admit(); d.OK {
		t.Fatal("admitted above the bound within the cooldown")
	}
	// After the cooldown admission returns.
	clock.Advance(1100 * time.Millisecond)
	p, d := s.Admit()
	if !d.OK {
		t.Fatalf("rejected after the cooldown with the CPU low: %+v", d)
	}
	p.Done(nil)
	for _, p := range held {
		p.Done(nil)
	}
}

func TestSystemReservesCapacityForCritical(t *testing.T) {
	clock := limit.NewFakeClock()
	cpu := &fakeCPU{}
	s := limit.NewSystem(0.8, 10*time.Second, time.Second, cpu, clock)
	s.SetReserve(0.25)
	for range 20 {
		var ps []limit.Permit
		for range 50 {
			p, _ := s.Admit()
			ps = append(ps, p)
		}
		clock.Advance(20 * time.Millisecond)
		for _, p := range ps {
			p.Done(nil)
		}
		clock.Advance(80 * time.Millisecond)
	}
	// 500/s × 20 ms = 10: critical 10, degradable 7, sheddable 5.
	cpu.set(1)
	admitted := map[limit.Criticality]int{}
	var held []limit.Permit
	for _, c := range []limit.Criticality{limit.Sheddable, limit.Degradable, limit.Critical} {
		for {
			p, d := s.AdmitAs(c)
			if !d.OK {
				break
			}
			admitted[c]++
			held = append(held, p)
		}
	}
	if admitted[limit.Sheddable] != 5 || admitted[limit.Degradable] != 2 || admitted[limit.Critical] != 3 {
		t.Fatalf("admitted %v, want sheddable up to 5 in flight, degradable to 7, critical to 10", admitted)
	}
	for _, p := range held {
		p.Done(nil)
	}
}

func TestCPUMeterReadsCgroupV1AndV2(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files map[string]string
		busy  float64 // of the second reading, ns
	}{
		{"v2", map[string]string{"cpu.stat": "usage_usec 1000\nuser_usec 600\n", "cpu.max": "50000 100000\n"}, 1000e3},
		{"v1", map[string]string{"cpuacct/cpuacct.usage": "2000000\n", "cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, 2e6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			for name, body := range tc.files {
				path := filepath.Join(root, name)
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			busy, total, err := limit.CgroupCPUAt(root, "/nonexistent")()
			if err != nil || busy != tc.busy || total <= 0 {
				t.Fatalf("read = %v, %v, %v; want busy %v and a positive total", busy, total, err, tc.busy)
			}
		})
	}
}

func TestCPUMeterAverages(t *testing.T) {
	var busy, total float64
	m := limit.NewCPUMeter(func() (float64, float64, error) { return busy, total, nil })
	_ = m.Sample() // primes
	for range 30 {
		busy, total = busy+90, total+100
		_ = m.Sample()
	}
	if got := m.CPUUsage(); math.Abs(got-0.9) > 0.01 {
		t.Fatalf("usage after 30 samples at 90 %% = %v", got)
	}
}

// TestSystemCPUHogExperiment is the system-protection experiment
// in virtual time. A service with 4 workers and 10 ms of work per request
// (400/s) gets 300 requests/s; from 5 s to 15 s a CPU hog on the host makes
// each request take 40 ms (100/s) and the CPU reads 95 %. Without the
// lever the backlog grows to seconds; with it, admitted requests stay
// fast while the excess is refused, and admission returns within seconds
// after the hog stops.
func TestSystemCPUHogExperiment(t *testing.T) {
	const (
		workers        = 4
		rate           = 300
		hogFrom, hogTo = 5 * time.Second, 15 * time.Second
		end            = 25 * time.Second
	)
	type result struct {
		hogP99    time.Duration // admitted requests that arrived during the hog
		refused   int
		recovered time.Duration // after the hog: first second with every request admitted
	}
	run := func(protect bool) result {
		clock := limit.NewFakeClock()
		cpu := &fakeCPU{}
		s := limit.NewSystem(0.8, 10*time.Second, time.Second, cpu, clock)
		type req struct {
			arrived time.Duration
			p       limit.Permit
		}
		var queue []req                        // admitted, waiting for a worker
		busy := make([]time.Duration, workers) // when each worker frees
		current := make([]req, workers)
		idle := make([]bool, workers)
		for i := range idle {
			idle[i] = true
		}
		var hogLat []time.Duration
		var res result
		perSecond := map[int][2]int{} // second → offered, admitted
		next := time.Duration(0)
		for now := time.Duration(0); now < end || len(queue) > 0; now += time.Millisecond {
			clock.Advance(time.Millisecond)
			hog := now >= hogFrom && now < hogTo
			if hog {
				cpu.set(0.95)
			} else {
				cpu.set(0.4)
			}
			for w := range workers { // finish work
				if !idle[w] && busy[w] <= now {
					current[w].p.Done(nil)
					if a := current[w].arrived; a >= hogFrom && a < hogTo {
						hogLat = append(hogLat, now-a)
					}
					idle[w] = true
				}
			}
			for ; now < end && next <= now; next += time.Second / rate { // arrivals
				sec := int(now / time.Second)
				c := perSecond[sec]
				c[0]++
				p, d := limit.Permit{}, limit.Decision{OK: true}
				if protect {
					p, d = s.Admit()
				}
				if d.OK {
					c[1]++
					queue = append(queue, req{now, p})
				} else {
					res.refused++
				}
				perSecond[sec] = c
			}
			for w := range workers { // start work
				if idle[w] && len(queue) > 0 {
					work := 10 * time.Millisecond
					if hog {
						work = 40 * time.Millisecond
					}
					current[w], queue = queue[0], queue[1:]
					busy[w], idle[w] = now+work, false
				}
			}
		}
		res.hogP99 = p99(hogLat)
		res.recovered = -1
		for sec := int(hogTo / time.Second); sec < int(end/time.Second); sec++ {
			if c := perSecond[sec]; c[1] == c[0] {
				res.recovered = time.Duration(sec)*time.Second - hogTo
				break
			}
		}
		return res
	}
	with, without := run(true), run(false)
	t.Logf("with system protection: admitted p99 during the hog %v, %d refused, full admission %v after the hog", with.hogP99, with.refused, with.recovered)
	t.Logf("without:                admitted p99 during the hog %v", without.hogP99)
	if with.hogP99 > 200*time.Millisecond {
		t.Errorf("admitted p99 during the hog = %v with the lever, want bounded (≤ 200 ms)", with.hogP99)
	}
	if without.hogP99 < 10*with.hogP99 {
		t.Errorf("without the lever p99 = %v, expected the backlog to grow far beyond %v", without.hogP99, with.hogP99)
	}
	if with.refused == 0 {
		t.Error("the lever refused nothing during the hog")
	}
	if with.recovered < 0 || with.recovered > 3*time.Second {
		t.Errorf("full admission returned %v after the hog, want within seconds", with.recovered)
	}
}
