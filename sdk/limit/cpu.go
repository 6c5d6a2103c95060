package limit

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultCPUInterval is how often a CPUMeter samples when run.
const DefaultCPUInterval = 250 * time.Millisecond

// cpuDecay weighs the previous reading in the moving average (Kratos' BBR
// uses 0.95 at 500 ms; 0.8 at 250 ms reacts within about a second).
const cpuDecay = 0.8

// CPUCounter reads cumulative CPU time: busy is what the process' cgroup
// (or the host) used, total what it could have used, in the same unit. The
// usage over an interval is Δbusy / Δtotal.
type CPUCounter func() (busy, total float64, err error)

// CPUMeter keeps a moving average of a CPUCounter's usage: Sample takes one
// reading, Run samples until its context ends. CPUUsage is one atomic load.
type CPUMeter struct {
	read      CPUCounter
	mu        sync.Mutex
	lastBusy  float64
	lastTotal float64
	primed    bool
	usage     atomic.Uint64 // float64 bits
}

// NewCPUMeter returns a meter over read; a nil read means CgroupCPU.
func NewCPUMeter(read CPUCounter) *CPUMeter {
	if read == nil {
		read = CgroupCPU()
	}
	return &CPUMeter{read: read}
}

// CPUUsage implements CPUSource: the moving average, 0–1.
func (m *CPUMeter) CPUUsage() float64 { return math.Float64frombits(m.usage.Load()) }

// Sample takes one reading and folds it into the average. The first call
// only primes the counters.
func (m *CPUMeter) Sample() error {
	busy, total, err := m.read()
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	db, dt := busy-m.lastBusy, total-m.lastTotal
	primed := m.primed
	m.lastBusy, m.lastTotal, m.primed = busy, total, true
	if !primed || dt <= 0 {
		return nil
	}
	u := min(max(db/dt, 0), 1)
	avg := cpuDecay*m.CPUUsage() + (1-cpuDecay)*u
	m.usage.Store(math.Float64bits(avg))
	return nil
}

// Run samples every interval (DefaultCPUInterval if ≤ 0) until ctx ends.
// A counter that fails leaves the average where it was.
func (m *CPUMeter) Run(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = DefaultCPUInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	_ = m.Sample()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_ = m.Sample()
		}
	}
}

var processCPU = sync.OnceValue(func() *CPUMeter {
	m := NewCPUMeter(nil)
	go m.Run(context.Background(), DefaultCPUInterval)
	return m
})

// ProcessCPU is the process-wide meter of CgroupCPU that system rules read
// by default. Its first use starts one goroutine that samples every
// DefaultCPUInterval for the life of the process (like Kratos' BBR).
func ProcessCPU() *CPUMeter { return processCPU() }

// CgroupCPU returns the CPU counter of this process' container: cgroup v2
// (cpu.stat usage_usec over cpu.max of the process' own cgroup, from
// /proc/self/cgroup), else cgroup v1 (cpuacct.usage over cpu.cfs_quota_us
// at the mount root, which a container sees as its own), else the host's
// /proc/stat. A cgroup without a quota may use every CPU the process may
// run on (runtime.NumCPU).
func CgroupCPU() CPUCounter {
	root := "/sys/fs/cgroup"
	if b, err := os.ReadFile("/proc/self/cgroup"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if p, ok := strings.CutPrefix(line, "0::"); ok && p != "/" && p != "" {
				if _, err := os.Stat(root + p + "/cpu.stat"); err == nil {
					root += p
				}
			}
		}
	}
	return CgroupCPUAt(root, "/proc/stat")
}

// CgroupCPUAt is CgroupCPU over a cgroup hierarchy mounted at root and a
// /proc/stat at procStat.
func CgroupCPUAt(root, procStat string) CPUCounter {
	start := time.Now()
	wall := func(cpus float64) float64 { return float64(time.Since(start)) * cpus }
	if _, err := os.Stat(root + "/cpu.stat"); err == nil {
		return func() (float64, float64, error) {
			usec, err := statField(root+"/cpu.stat", "usage_usec")
			if err != nil {
				return 0, 0, err
			}
			return usec * 1e3, wall(cgroupV2CPUs(root + "/cpu.max")), nil
		}
	}
	if _, err := os.Stat(root + "/cpuacct/cpuacct.usage"); err == nil {
		return func() (float64, float64, error) {
			ns, err := readNumber(root + "/cpuacct/cpuacct.usage")
			if err != nil {
				return 0, 0, err
			}
			return ns, wall(cgroupV1CPUs(root + "/cpu")), nil
		}
	}
	return func() (float64, float64, error) { return hostCPU(procStat) }
}

func cgroupV2CPUs(path string) float64 {
	b, err := os.ReadFile(path)
	if f := strings.Fields(string(b)); err == nil && len(f) == 2 && f[0] != "max" {
		q, e1 := strconv.ParseFloat(f[0], 64)
		p, e2 := strconv.ParseFloat(f[1], 64)
		if e1 == nil && e2 == nil && q > 0 && p > 0 {
			return min(q/p, float64(runtime.NumCPU()))
		}
	}
	return float64(runtime.NumCPU())
}

func cgroupV1CPUs(dir string) float64 {
	q, e1 := readNumber(dir + "/cpu.cfs_quota_us")
	p, e2 := readNumber(dir + "/cpu.cfs_period_us")
	if e1 == nil && e2 == nil && q > 0 && p > 0 {
		return min(q/p, float64(runtime.NumCPU()))
	}
	return float64(runtime.NumCPU())
}

func readNumber(path string) (float64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
}

func statField(path, name string) (float64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), " "); ok && k == name {
			return strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	return 0, errors.New("limit: " + path + " has no " + name)
}

// hostCPU reads the first line of /proc/stat: busy is every column but
// idle and iowait, total all of them (jiffies).
func hostCPU(path string) (busy, total float64, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, err
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 5 || f[0] != "cpu" {
		return 0, 0, errors.New("limit: " + path + " has no cpu line")
	}
	for i, s := range f[1:] {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return 0, 0, err
		}
		total += v
		if i != 3 && i != 4 { // idle, iowait
			busy += v
		}
	}
	return busy, total, nil
}
