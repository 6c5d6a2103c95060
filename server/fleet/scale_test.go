package fleet

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/switchyard-io/switchyard/internal/etcdtest"
	"github.com/switchyard-io/switchyard/internal/fleetsim"
	"github.com/switchyard-io/switchyard/sdk/wire"
)

// BenchmarkScale simulates a fleet of 10,000 instances of one app reading
// 1,000 switches, each reporting as the SDK does (every 10–12 s, only
// the entries that changed; acks on the SDK's schedule, sdk/ack), with
// lightweight reporters sharing four etcd connections against one embedded
// etcd. It reports the etcd writes per second the reports cost, the fleet
// model's heap and CPU, and the time from a flip until applied-by-N/M reads
// N/N. Targets (DESIGN §8): ≤ 1,000 writes/s, ≤ 1 GiB, ≤ 1 core, ≤ 2 s.
// Then a burst, burstFlips flips burstSpacing apart: the fleet's peak and
// mean etcd writes a second (acks and reports) and the time from the last
// flip until applied-by reads N/N (see docs/design.md, "Acks").
//
// The burst's two targets (issue 26: peak ≤ 2,000 writes/s, N/N ≤ 3 s)
// cannot both hold at 10,000 instances: every instance must write after
// the last flip before applied-by reads N/N, and 10,000 writes in 3 s are
// ≥ 3,334 writes/s on average. The ack schedule keeps N/N (acks spread
// over 1.5 s, so ~0.25 + 1.5 s plus etcd's queue) and pays a peak of about
// N / 1.5 s = 6,667 writes/s, capped here by what the one embedded etcd
// on this box absorbs; a 2,000/s peak would need a 5 s spread and N/N
// ≈ 5.25 s.
//
// Measured on 2 cores shared with other work (load average 9–11), one run
// each, back to back: before, the simulator wrote an instance's ack and its
// periodic report as two writes (the SDK writes one); after, it follows
// sdk/ack and the SDK's one write:
//
//	          flip→N/N   burst peak     burst mean     last flip→N/N
//	before    1818 ms    7669 writes/s  3648 writes/s  1755 ms
//	after     1755 ms    7427 writes/s  2779 writes/s  1776 ms
//
// N/N within 3 s after the burst and within 2 s after a single flip; the
// peak is the spread's N / 1.5 s, as near as etcd on this box keeps up.
//
//	go test ./server/fleet -run '^$' -bench Scale -benchtime 1x
func BenchmarkScale(b *testing.B) {
	const (
		instances = 10000
		switches  = 1000
		conns     = 4
		interval  = 10 * time.Second
		degraded  = 5 // switches each instance answers degraded
	)
	srv := etcdtest.Start(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clients := make([]*clientv3.Client, conns)
	for i := range clients {
		clients[i] = srv.Client(b)
	}
	for i := 0; i < switches; i++ {
		sw := fmt.Sprintf(`{"app":"checkout","name":"sw-%04d","level":"L3","state":"off","rollout":{"percent":100},"version":1}`, i)
		if _, err := clients[0].Put(ctx, wire.SwitchKey("default", "checkout", fmt.Sprintf("sw-%04d", i)), sw); err != nil {
			b.Fatal(err)
		}
	}
	fleet := fleetsim.New(instances, switches, degraded, clients)
	b.Logf("registering %d instances", instances)
	fleet.RegisterAll(ctx)

	// The model lists the whole fleet, then follows it; its heap is what
	// the listing and the watch leave live.
	heapBefore := liveHeap()
	m := New(Config{Namespace: "default"})
	model := clients[0]
	runCtx, stopModel := context.WithCancel(ctx)
	var runDone sync.WaitGroup
	runDone.Add(1)
	cpuBefore := cpuTime()
	start := time.Now()
	go func() { defer runDone.Done(); m.Run(runCtx, model) }()
	for !m.Synced() {
		time.Sleep(10 * time.Millisecond)
	}
	b.Logf("model listed %d instances in %v", instances, time.Since(start).Round(time.Millisecond))

	// Steady state: every instance reports on its interval.
	go fleet.Report(ctx, interval)
	b.ResetTimer()
	window := 3 * interval
	puts0 := fleet.Puts()
	applyBefore := m.applyTime()
	time.Sleep(window)
	writes := float64(fleet.Puts()-puts0) / window.Seconds()
	modelCPU := (m.applyTime() - applyBefore).Seconds() / window.Seconds()
	heap := liveHeap() - heapBefore

	// A flip: every instance acks 250 ms–1.75 s after it sees it.
	resp, err := clients[0].Put(ctx, wire.SwitchKey("default", "checkout", "sw-0000"),
		`{"app":"checkout","name":"sw-0000","level":"L3","state":"on","rollout":{"percent":100},"version":2}`)
	if err != nil {
		b.Fatal(err)
	}
	flipped := time.Now()
	rev := resp.Header.Revision
	for {
		if n, total := m.AppliedBy("checkout", rev, nil); n == instances && total == instances {
			break
		}
		if time.Since(flipped) > 30*time.Second {
			n, total := m.AppliedBy("checkout", rev, nil)
			b.Fatalf("applied by %d/%d after 30 s", n, total)
		}
		time.Sleep(5 * time.Millisecond)
	}
	converged := time.Since(flipped)

	// A burst: flips in quick succession, as in an incident; the acks of
	// each meet the next.
	burst := runBurst(ctx, b, fleet, m, clients[0], burstFlips, burstSpacing)
	b.StopTimer()
	stopModel()
	runDone.Wait()
	totalCPU := cpuTime() - cpuBefore
	read, bad := m.Reports()
	b.ReportMetric(writes, "report-writes/s")
	b.ReportMetric(float64(heap)/(1<<20), "model-heap-MiB")
	b.ReportMetric(modelCPU, "model-cores")
	b.ReportMetric(float64(converged.Milliseconds()), "flip-to-N/N-ms")
	b.ReportMetric(burst.peak, "burst-peak-writes/s")
	b.ReportMetric(burst.mean, "burst-mean-writes/s")
	b.ReportMetric(float64(burst.converged.Milliseconds()), "burst-last-flip-to-N/N-ms")
	b.Logf("reports read %d (malformed %d), mean report %d bytes, %d writes refused, process CPU %v over the run (reporters and etcd included)",
		read, bad, fleet.Bytes()/max(fleet.Puts(), 1), fleet.Failed(), totalCPU.Round(time.Millisecond))
}

// The burst phase of BenchmarkScale: burstFlips flips of one switch,
// burstSpacing apart.
const (
	burstFlips   = 10
	burstSpacing = 200 * time.Millisecond
)

// burstResult is what a burst cost: the fleet's etcd writes per second
// (acks and reports), at their peak over any second and on average from
// the first flip until applied-by read N/N for the last, and that time
// counted from the last flip.
type burstResult struct {
	peak, mean float64
	converged  time.Duration
}

// runBurst flips sw-0001 n times, spacing apart, and waits until the model
// reads the last flip applied by the whole fleet.
func runBurst(ctx context.Context, b *testing.B, f *fleetsim.Fleet, m *Model, cli *clientv3.Client, n int, spacing time.Duration) burstResult {
	const sample = 100 * time.Millisecond
	var counts []int64 // fleet.puts every sample from the first flip
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(sample)
		defer t.Stop()
		counts = append(counts, f.Puts())
		for {
			select {
			case <-done:
				counts = append(counts, f.Puts())
				return
			case <-t.C:
				counts = append(counts, f.Puts())
			}
		}
	}()
	start := time.Now()
	var rev int64
	for k := 0; k < n; k++ {
		state := "on"
		if k%2 == 1 {
			state = "off"
		}
		resp, err := cli.Put(ctx, wire.SwitchKey("default", "checkout", "sw-0001"),
			fmt.Sprintf(`{"app":"checkout","name":"sw-0001","level":"L3","state":%q,"rollout":{"percent":100},"version":%d}`, state, k+2))
		if err != nil {
			b.Fatal(err)
		}
		rev = resp.Header.Revision
		if k < n-1 {
			time.Sleep(spacing)
		}
	}
	last := time.Now()
	for {
		if got, total := m.AppliedBy("checkout", rev, nil); got == total && total == f.N() {
			break
		}
		if time.Since(last) > 60*time.Second {
			got, total := m.AppliedBy("checkout", rev, nil)
			b.Fatalf("burst: applied by %d/%d after 60 s", got, total)
		}
		time.Sleep(5 * time.Millisecond)
	}
	r := burstResult{converged: time.Since(last)}
	elapsed := time.Since(start)
	close(done)
	<-sampled
	perSecond := int(time.Second / sample)
	for i := 0; i+perSecond < len(counts); i++ {
		r.peak = max(r.peak, float64(counts[i+perSecond]-counts[i]))
	}
	r.mean = float64(counts[len(counts)-1]-counts[0]) / elapsed.Seconds()
	return r
}

// applyTime is the time the model spent applying etcd data (listing and
// watch events): it does that work on one goroutine, so it is the CPU the
// model costs to keep up.
func (m *Model) applyTime() time.Duration { return time.Duration(m.applyNanos.Load()) }

func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
