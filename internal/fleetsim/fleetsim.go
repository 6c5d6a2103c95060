// Package fleetsim simulates a fleet of SDK instances against etcd without
// running SDKs: each instance reports as the SDK does (every 10–12 s, only
// the entries that changed; acks on the SDK's schedule), through a few
// shared etcd connections. An instance acks on the SDK's own schedule
// (sdk/ack), and, as in the SDK, every write of its key carries its
// applied revision and restarts its report interval: an ack is the report
// of its interval, and a report acks what it carries. server/fleet's
// BenchmarkScale and the console's soak test (server/console TestSoak)
// drive it.
package fleetsim

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/switchyard-io/switchyard/sdk/ack"
	"github.com/switchyard-io/switchyard/sdk/wire"
)

// Fleet is the simulated instances of app "checkout" in namespace
// "default": each has an id, the revision it applied, counters of its
// degraded switches, and what it reported last.
type Fleet struct {
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
	acks     []simAck        // per instance
	written  []chan struct{} // per instance: an ack was written, the report interval restarts
}

// simAck is an instance's ack state.
type simAck struct {
	sched   ack.Schedule
	applied time.Time // when it last applied a change
	acked   int64     // the revision its key carries
	armed   bool      // a timer will look at sched
}

// New makes n instances reading switches sw-0000…, each answering
// degraded of them degraded, writing through clients (instance i through
// clients[i % len(clients)]).
func New(n, switches, degraded int, clients []*clientv3.Client) *Fleet {
	f := &Fleet{switches: switches, degraded: degraded, clients: clients, applied: make([]atomic.Int64, n), started: time.Now(),
		rotation: make([]int, n), acks: make([]simAck, n), written: make([]chan struct{}, n)}
	for i := 0; i < n; i++ {
		f.ids = append(f.ids, fmt.Sprintf("checkout-%05d", i))
		f.written[i] = make(chan struct{}, 1)
	}
	return f
}

// value is instance i's key value, acking rev, with a report of the given
// entries; an ack carries no report.
func (f *Fleet) value(i int, rev int64, full, ackOnly bool) []byte {
	now := time.Now().Unix()
	if ackOnly {
		b, _ := json.Marshal(wire.Instance{
			App: "checkout", InstanceID: f.ids[i], SDKVersion: "sim", AppliedRevision: rev,
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
		App: "checkout", InstanceID: f.ids[i], SDKVersion: "sim", AppliedRevision: rev,
		StartedAt: f.started, ReportInterval: wire.Duration(10 * time.Second), Report: r,
	})
	return b
}

// put writes instance i's key and reports whether etcd took it. The
// write acks the revision it carries.
func (f *Fleet) put(ctx context.Context, i int, full, ackOnly bool) bool {
	c := i % len(f.clients)
	rev := f.applied[i].Load()
	v := f.value(i, rev, full, ackOnly)
	if _, err := f.clients[c].Put(ctx, wire.InstanceKey("default", "checkout", f.ids[i]), string(v), clientv3.WithLease(f.leases[c])); err != nil {
		f.failed.Add(1)
		return false
	}
	f.puts.Add(1)
	f.bytes.Add(int64(len(v)))
	f.ackMu.Lock()
	if a := &f.acks[i]; rev > a.acked {
		a.acked = rev
		a.sched.Acked(time.Now())
	}
	f.ackMu.Unlock()
	return true
}

// RegisterAll grants one lease per connection and writes every instance's
// first report, 64 at a time.
func (f *Fleet) RegisterAll(ctx context.Context) {
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

func (f *Fleet) parallel(ctx context.Context, workers int, fn func(i int)) {
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

// noteApplied is instance i applying a revision at now: unless a timer
// looks at its ack schedule already, one will when the ack is due.
func (f *Fleet) noteApplied(ctx context.Context, i int, now time.Time, acks chan<- int) {
	f.ackMu.Lock()
	defer f.ackMu.Unlock()
	a := &f.acks[i]
	a.applied = now
	if a.armed {
		return
	}
	if due := a.sched.Due(f.applied[i].Load() > a.acked, now); !due.IsZero() {
		f.lookAt(ctx, i, due, acks)
	}
}

// lookAt (f.ackMu held) arms a timer that looks at instance i's ack
// schedule at t: when the ack is due it goes to the ack writers, when it
// is not yet the timer looks again then, and with nothing to ack it stops.
func (f *Fleet) lookAt(ctx context.Context, i int, t time.Time, acks chan<- int) {
	a := &f.acks[i]
	a.armed = true
	time.AfterFunc(time.Until(t), func() {
		f.ackMu.Lock()
		due := a.sched.Due(f.applied[i].Load() > a.acked, a.applied)
		if !due.IsZero() && time.Now().Before(due) {
			f.lookAt(ctx, i, due, acks)
			f.ackMu.Unlock()
			return
		}
		a.armed = false
		f.ackMu.Unlock()
		if due.IsZero() {
			return
		}
		select {
		case acks <- i:
		case <-ctx.Done():
		}
	})
}

// ack writes instance i's ack, which restarts its report interval as the
// SDK's write does; a failed one is retried at the SDK's next poll.
func (f *Fleet) ack(ctx context.Context, i int, acks chan<- int) {
	if f.put(ctx, i, false, true) {
		select {
		case f.written[i] <- struct{}{}:
		default:
		}
		return
	}
	if ctx.Err() != nil {
		return
	}
	f.ackMu.Lock()
	if !f.acks[i].armed {
		f.lookAt(ctx, i, time.Now().Add(ack.Quiet+rand.N(2*ack.Quiet)), acks)
	}
	f.ackMu.Unlock()
}

// Report runs until ctx ends: each instance reports every 1–1.2 intervals
// after its last write, and acks new switch revisions of app checkout on
// the SDK's schedule (one watch per connection, as instances of one host
// would share it).
func (f *Fleet) Report(ctx context.Context, interval time.Duration) {
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
			for wr := range f.clients[c].Watch(ctx, wire.AppPrefix("default", wire.KindSwitches, "checkout"), clientv3.WithPrefix()) {
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
				case <-f.written[i]:
					t.Reset(interval + rand.N(interval/5))
					continue
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

// N is the number of instances.
func (f *Fleet) N() int { return len(f.ids) }

// Puts is the number of instance keys written so far.
func (f *Fleet) Puts() int64 { return f.puts.Load() }

// Bytes is the number of bytes those writes carried.
func (f *Fleet) Bytes() int64 { return f.bytes.Load() }

// Failed is the number of writes etcd refused.
func (f *Fleet) Failed() int64 { return f.failed.Load() }
