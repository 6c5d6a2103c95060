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
// 1,000 switches, each reporting as the SDK does (every 10–12 s, only
// the entries that changed; acks on the SDK's schedule, see ackMin), with
// lightweight reporters sharing four etcd connections against one embedded
// etcd. It reports the etcd writes per second the reports cost, the fleet
// model's heap and CPU, and the time from a flip until applied-by-N/M reads
// N/N. Targets (DESIGN §8): ≤ 1,000 writes/s, ≤ 1 GiB, ≤ 1 core, ≤ 2 s.
// Then a burst, burstFlips flips burstSpacing apart: the fleet's peak and
// mean etcd writes a second (acks and reports) and the time from the last
// flip until applied-by reads N/N (see docs/design.md, "Acks").
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

	// A burst: flips in quick succession, as in an incident; the acks of
	// each meet the next.
	burst := fleet.burst(ctx, b, m, clients[0], burstFlips, burstSpacing)
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
		read, bad, fleet.bytes.Load()/max(fleet.puts.Load(), 1), fleet.failed.Load(), totalCPU.Round(time.Millisecond))
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

// burst flips sw-0001 n times, spacing apart, and waits until the model
// reads the last flip applied by the whole fleet.
func (f *simFleet) burst(ctx context.Context, b *testing.B, m *Model, cli *clientv3.Client, n int, spacing time.Duration) burstResult {
	const sample = 100 * time.Millisecond
	var counts []int64 // fleet.puts every sample from the first flip
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(sample)
		defer t.Stop()
		counts = append(counts, f.puts.Load())
		for {
			select {
			case <-done:
				counts = append(counts, f.puts.Load())
				return
			case <-t.C:
				counts = append(counts, f.puts.Load())
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
		if got, total := m.AppliedBy("checkout", rev, nil); got == total && total == len(f.ids) {
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
	failed   atomic.Int64 // writes etcd refused
	bytes    atomic.Int64
	mu       sync.Mutex
	rotation []int // per instance: next switch whose last read to refresh
	ackMu    sync.Mutex
	acks     []simAck // per instance
}

// simAck is an instance's pending ack: the last change applied, the
// oldest one not acked (zero: none) and the delay drawn for it.
type simAck struct {
	last, since time.Time
	delay       time.Duration
}

func newSimFleet(n, switches, degraded int, clients []*clientv3.Client) *simFleet {
	f := &simFleet{switches: switches, degraded: degraded, clients: clients, applied: make([]atomic.Int64, n), started: time.Now(), rotation: make([]int, n), acks: make([]simAck, n)}
	for i := 0; i < n; i++ {
		f.ids = append(f.ids, fmt.Sprintf("checkout-%05d", i))
	}
	return f
}

// value is instance i's key value with a report of the given entries; an
// ack carries no report.
func (f *simFleet) value(i int, full, ack bool) []byte {
	now := time.Now().Unix()
	if ack {
		b, _ := json.Marshal(wire.Instance{
			App: "checkout", InstanceID: f.ids[i], SDKVersion: "sim", AppliedRevision: f.applied[i].Load(),
			StartedAt: f.started, ReportInterval: wire.Duration(10 * time.Second),
		})
		return b
	}
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

// put writes instance i's key and reports whether etcd took it.
func (f *simFleet) put(ctx context.Context, i int, full, ack bool) bool {
	c := i % len(f.clients)
	v := f.value(i, full, ack)
	if _, err := f.clients[c].Put(ctx, wire.InstanceKey("default", "checkout", f.ids[i]), string(v), clientv3.WithLease(f.leases[c])); err != nil {
		f.failed.Add(1)
		return false
	}
	f.puts.Add(1)
	f.bytes.Add(int64(len(v)))
	return true
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
	f.parallel(ctx, 64, func(i int) { f.put(ctx, i, true, false) })
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

// The SDK's ack schedule (sdk/registry.go, acker), which the simulated
// instances follow: an ack once the applied revision has been quiet for
// ackMin plus up to ackSpread (drawn once per ack), or ackMaxWait plus the
// same random part after the oldest change it covers.
const (
	ackMin     = 250 * time.Millisecond
	ackSpread  = 1500 * time.Millisecond
	ackMaxWait = 3 * time.Second
)

// noteApplied is instance i applying a revision at now: unless an ack is
// pending already, it schedules one.
func (f *simFleet) noteApplied(ctx context.Context, i int, now time.Time, acks chan<- int) {
	f.ackMu.Lock()
	defer f.ackMu.Unlock()
	a := &f.acks[i]
	a.last = now
	if !a.since.IsZero() {
		return
	}
	a.since, a.delay = now, ackMin+rand.N(ackSpread)
	f.scheduleAck(ctx, i, acks)
}

// scheduleAck sends instance i to the ack writers when its pending ack is
// due, checking again then: a change applied meanwhile may put it off.
func (f *simFleet) scheduleAck(ctx context.Context, i int, acks chan<- int) {
	a := &f.acks[i]
	due := min(a.last.Add(a.delay).UnixNano(), a.since.Add(ackMaxWait+a.delay-ackMin).UnixNano())
	time.AfterFunc(time.Until(time.Unix(0, due)), func() {
		f.ackMu.Lock()
		if time.Now().UnixNano() < min(a.last.Add(a.delay).UnixNano(), a.since.Add(ackMaxWait+a.delay-ackMin).UnixNano()) {
			f.scheduleAck(ctx, i, acks)
			f.ackMu.Unlock()
			return
		}
		a.since = time.Time{}
		f.ackMu.Unlock()
		select {
		case acks <- i:
		case <-ctx.Done():
		}
	})
}

// ack writes instance i's ack; a failed one is retried at the SDK's next
// poll.
func (f *simFleet) ack(ctx context.Context, i int, acks chan<- int) {
	if f.put(ctx, i, false, true) || ctx.Err() != nil {
		return
	}
	time.AfterFunc(ackMin+rand.N(2*ackMin), func() {
		select {
		case acks <- i:
		case <-ctx.Done():
		}
	})
}

// report runs until ctx ends: each instance reports every 1–1.2 intervals,
// and acks new switch revisions as the SDK does (see ackMin; one watch per
// connection, as instances of one host would share it).
func (f *simFleet) report(ctx context.Context, interval time.Duration) {
	due, acks := make(chan int, 1024), make(chan int, 1024)
	// Acks go first: an instance writes its own key, so its ack never
	// waits behind other instances' reports as it could in this pool.
	for w := 0; w < 64; w++ {
		go func() {
			for {
				select {
				case i := <-acks:
					f.ack(ctx, i, acks)
					continue
				default:
				}
				select {
				case <-ctx.Done():
					return
				case i := <-due:
					f.put(ctx, i, false, false)
				case i := <-acks:
					f.ack(ctx, i, acks)
				}
			}
		}()
	}
	for c := range f.clients {
		go func() {
			for wr := range f.clients[c].Watch(ctx, wire.KindPrefix("default", wire.KindSwitches), clientv3.WithPrefix()) {
				rev, now := wr.Header.Revision, time.Now()
				for i := c; i < len(f.ids); i += len(f.clients) {
					f.applied[i].Store(rev)
					f.noteApplied(ctx, i, now, acks)
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
				t.Reset(interval + rand.N(interval/5))
			}
		}()
	}
}
