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
// the entries that changed, an ack 250 ms–1 s after a new revision), with
// lightweight reporters sharing four etcd connections against one embedded
// etcd. It reports the etcd writes per second the reports cost, the fleet
// model's heap and CPU, and the time from a flip until applied-by-N/M reads
// N/N. Targets (DESIGN §8): ≤ 1,000 writes/s, ≤ 1 GiB, ≤ 1 core, ≤ 2 s.
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

	// A flip: every instance acks 250 ms–1 s after it sees it.
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
	b.StopTimer()
	stopModel()
	runDone.Wait()
	totalCPU := cpuTime() - cpuBefore
	read, bad := m.Reports()
	b.ReportMetric(writes, "report-writes/s")
	b.ReportMetric(float64(heap)/(1<<20), "model-heap-MiB")
	b.ReportMetric(modelCPU, "model-cores")
	b.ReportMetric(float64(converged.Milliseconds()), "flip-to-N/N-ms")
	b.Logf("reports read %d (malformed %d), mean report %d bytes, process CPU %v over the run (reporters and etcd included)",
		read, bad, fleet.Bytes()/max(fleet.Puts(), 1), totalCPU.Round(time.Millisecond))
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
