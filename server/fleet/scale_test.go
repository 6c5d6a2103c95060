package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/switchyard-io/switchyard/internal/etcdtest"
	"github.com/switchyard-io/switchyard/sdk/wire"
)

// BenchmarkScale simulates a fleet of 10,000 instances of one app reading
// 1,000 switches, each reporting as the SDK does (every 10 s ± 10 %, only
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
	fleet := newSimFleet(instances, switches, degraded, clients)
	b.Logf("registering %d instances", instances)
	fleet.registerAll(ctx)

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
	go fleet.report(ctx, interval)
	b.ResetTimer()
	window := 3 * interval
	puts0 := fleet.puts.Load()
	applyBefore := m.applyTime()
	time.Sleep(window)
	writes := float64(fleet.puts.Load()-puts0) / window.Seconds()
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
		read, bad, fleet.bytes.Load()/max(fleet.puts.Load(), 1), totalCPU.Round(time.Millisecond))
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

// simFleet is the simulated instances: each has an id, the revision it
// applied, counters of its degraded switches, and what it reported last.
type simFleet struct {
	ids      []string
	switches int
	degraded int
	clients  []*clientv3.Client
	leases   []clientv3.LeaseID
	applied  []atomic.Int64
	started  time.Time
	puts     atomic.Int64
	bytes    atomic.Int64
	mu       sync.Mutex
	rotation []int // per instance: next switch whose last read to refresh
}

func newSimFleet(n, switches, degraded int, clients []*clientv3.Client) *simFleet {
	f := &simFleet{switches: switches, degraded: degraded, clients: clients, applied: make([]atomic.Int64, n), started: time.Now(), rotation: make([]int, n)}
	for i := 0; i < n; i++ {
		f.ids = append(f.ids, fmt.Sprintf("checkout-%05d", i))
	}
	return f
}

// value is instance i's key value with a report of the given entries.
func (f *simFleet) value(i int, full bool) []byte {
	now := time.Now().Unix()
	r := &wire.Report{At: now, Switches: map[string]wire.SwitchSignal{}}
	elapsed := uint64(time.Since(f.started).Seconds()*100) + 1
	for s := 0; s < f.degraded; s++ {
		sw := (i + s*37) % f.switches
		r.Switches[fmt.Sprintf("sw-%04d", sw)] = wire.SwitchSignal{Degraded: elapsed, LastRead: now, Latency: []uint64{elapsed, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}}
	}
	// Last reads rotate through every switch within a few reports, within
	// the size bound, as the SDK does.
	f.mu.Lock()
	budget := 33
	if full {
		budget = 300
	}
	for k := 0; k < budget; k++ {
		sw := f.rotation[i]
		f.rotation[i] = (sw + 1) % f.switches
		name := fmt.Sprintf("sw-%04d", sw)
		if _, ok := r.Switches[name]; !ok {
			r.Switches[name] = wire.SwitchSignal{LastRead: now}
		}
	}
	f.mu.Unlock()
	b, _ := json.Marshal(wire.Instance{
		App: "checkout", InstanceID: f.ids[i], SDKVersion: "sim", AppliedRevision: f.applied[i].Load(),
		StartedAt: f.started, ReportInterval: wire.Duration(10 * time.Second), Report: r,
	})
	return b
}

func (f *simFleet) put(ctx context.Context, i int, full bool) {
	c := i % len(f.clients)
	v := f.value(i, full)
	if _, err := f.clients[c].Put(ctx, wire.InstanceKey("default", "checkout", f.ids[i]), string(v), clientv3.WithLease(f.leases[c])); err == nil {
		f.puts.Add(1)
		f.bytes.Add(int64(len(v)))
	}
}

// registerAll grants one lease per connection and writes every instance's
// first report, 64 at a time.
func (f *simFleet) registerAll(ctx context.Context) {
	for _, c := range f.clients {
		l, err := c.Grant(ctx, 60)
		if err != nil {
			panic(err)
		}
		f.leases = append(f.leases, l.ID)
		ka, err := c.KeepAlive(ctx, l.ID)
		if err != nil {
			panic(err)
		}
		go func() {
			for range ka {
			}
		}()
	}
	f.parallel(ctx, 64, func(i int) { f.put(ctx, i, true) })
}

func (f *simFleet) parallel(ctx context.Context, workers int, fn func(i int)) {
	next := atomic.Int64{}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= len(f.ids) {
					return
				}
				fn(i)
			}
		}()
	}
	wg.Wait()
}

// report runs until ctx ends: each instance reports every interval ± 10 %,
// and acks a new switch revision 250 ms–1 s after it sees it (one watch per
// connection, as instances of one host would share it).
func (f *simFleet) report(ctx context.Context, interval time.Duration) {
	due := make(chan int, 1024)
	for w := 0; w < 32; w++ {
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case i := <-due:
					f.put(ctx, i, false)
				}
			}
		}()
	}
	for c := range f.clients {
		go func() {
			for wr := range f.clients[c].Watch(ctx, wire.KindPrefix("default", wire.KindSwitches), clientv3.WithPrefix()) {
				rev := wr.Header.Revision
				for i := c; i < len(f.ids); i += len(f.clients) {
					f.applied[i].Store(rev)
					time.AfterFunc(250*time.Millisecond+rand.N(750*time.Millisecond), func() {
						select {
						case due <- i:
						case <-ctx.Done():
						}
					})
				}
			}
		}()
	}
	for i := range f.ids {
		first := rand.N(interval)
		go func() {
			t := time.NewTimer(first)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
				select {
				case due <- i:
				case <-ctx.Done():
					return
				}
				t.Reset(interval - interval/10 + rand.N(interval/5))
			}
		}()
	}
}
