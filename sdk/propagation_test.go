package sdk

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/switchyard-io/switchyard/internal/etcdtest"
	"github.com/switchyard-io/switchyard/sdk/wire"
)

// BenchmarkPropagation measures flip → applied for N SDK clients (each
// with its own etcd connection, watch and instance registration) on one
// embedded etcd, and in the same run the raw-etcd baseline: N plain
// clientv3 clients watching one key. A sample is the time from just before
// the Put until a client's On reflects the flip (SDK: the OnChange callback
// after the snapshot swap; baseline: the watch event received). The SDK
// phase runs first, its clients are closed, then the baseline phase runs
// with the same N on the same etcd. See flipSpacing.
func BenchmarkPropagation(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("clients=%d", n), func(b *testing.B) { benchPropagation(b, n) })
	}
}

// flipSpacing separates flips so that each is measured on its own, as
// flips are in practice: it exceeds the registry ack window
// (debounceMin+debounceJitter), so one flip's acks never compete with the
// next flip's fan-out, while they do overlap the tail of their own.
var debugProp = os.Getenv("SWITCHYARD_DEBUG_PROPAGATION") != ""

const flipSpacing = debounceMin + debounceJitter + 250*time.Millisecond

// minFlips is the least number of flips per phase, whatever b.N is, so
// that a default -benchtime run still yields n*minFlips samples.
const minFlips = 15

func benchPropagation(b *testing.B, n int) {
	flips := max(b.N, minFlips)
	srv := etcdtest.Start(b)
	admin := srv.Client(b)
	const ns, app, name = "bench", "checkout", "prop"
	rawKey := "/raw-baseline/" + name

	// SDK clients.
	var pending atomic.Int64
	var want atomic.Bool
	var t0 atomic.Int64
	var cur atomic.Int64 // flip number, indexes the sample slices
	// One slot per (flip, client): recording takes no lock, so the
	// harness adds no contention of its own to either phase.
	sdkLat := make([]time.Duration, n*flips)
	rawLat := make([]time.Duration, n*flips)
	var rawPending atomic.Int64
	record := func(lat []time.Duration, i int) {
		lat[int(cur.Load())*n+i] = time.Duration(time.Now().UnixNano() - t0.Load())
	}
	clients := make([]*Client, n)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := New(context.Background(), Config{Endpoints: []string{srv.Endpoint}, Namespace: ns, App: app,
				InstanceID: fmt.Sprintf("bench-%04d", i), Logger: discard, DialTimeout: 30 * time.Second})
			if err != nil {
				b.Error(err)
				return
			}
			c.OnChange(func(ch Change) {
				if ch.Name == name && ch.On == want.Load() {
					record(sdkLat, i)
					pending.Add(-1)
				}
			})
			clients[i] = c
		}()
	}
	wg.Wait()
	closeSDK := sync.OnceFunc(func() {
		for _, c := range clients {
			if c != nil {
				wg.Add(1)
				go func() { defer wg.Done(); c.Close() }()
			}
		}
		wg.Wait()
	})
	defer closeSDK()
	for _, c := range clients {
		if err := c.WaitReady(ctxT(b, 60*time.Second)); err != nil {
			b.Fatal(err)
		}
	}

	flip := func(k int, on bool) {
		sw := mkSwitch(app, name, wire.StateOff, 100)
		if on {
			sw.State = wire.StateOn
		}
		want.Store(on)
		cur.Store(int64(k))
		pending.Store(int64(n))
		t0.Store(time.Now().UnixNano())
		putSwitch(b, admin, ns, sw)
		waitFor(b, 60*time.Second, "all SDK clients applied", func() bool { return pending.Load() <= 0 })
		if debugProp {
			_, p99 := percentiles(sdkLat[k*n : (k+1)*n])
			b.Logf("sdk flip p99 %.1f ms", p99)
		}
	}
	rawFlip := func(i int) {
		cur.Store(int64(i))
		rawPending.Store(int64(n))
		t0.Store(time.Now().UnixNano())
		put(b, admin, rawKey, fmt.Sprint(i))
		waitFor(b, 60*time.Second, "all raw watchers received", func() bool { return rawPending.Load() <= 0 })
		if debugProp {
			_, p99 := percentiles(rawLat[i*n : (i+1)*n])
			b.Logf("raw flip p99 %.1f ms", p99)
		}
	}
	// Phase 1: the SDK clients alone, after their start-up registrations
	// and acks have settled.
	time.Sleep(flipSpacing)
	b.ResetTimer()
	for i := 0; i < flips; i++ {
		flip(i, i%2 == 0)
		time.Sleep(flipSpacing)
	}
	b.StopTimer()
	for _, c := range clients {
		if got, wantOn := c.On(context.Background(), name), (flips-1)%2 == 0; got != wantOn {
			b.Fatalf("%s answers %v, want %v", c.InstanceID(), got, wantOn)
		}
	}
	closeSDK()

	// Phase 2: the raw clientv3 baseline alone, same N, same etcd.
	wctx, wcancel := context.WithCancel(context.Background())
	var rawWG sync.WaitGroup
	raws := make([]*clientv3.Client, n)
	ready := make(chan struct{}, n)
	for i := range raws {
		cli, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.Endpoint}, DialTimeout: 30 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			b.Fatal(err)
		}
		raws[i] = cli
		wch := cli.Watch(clientv3.WithRequireLeader(wctx), rawKey, clientv3.WithCreatedNotify())
		rawWG.Add(1)
		go func() {
			defer rawWG.Done()
			for wr := range wch {
				if wr.Created {
					ready <- struct{}{}
				}
				for range wr.Events {
					record(rawLat, i)
					rawPending.Add(-1)
				}
			}
		}()
	}
	for range raws {
		<-ready
	}
	defer func() {
		wcancel()
		for _, cli := range raws {
			cli.Close()
		}
		rawWG.Wait()
	}()

	time.Sleep(300 * time.Millisecond)
	b.StartTimer()
	for i := 0; i < flips; i++ {
		rawFlip(i)
		time.Sleep(flipSpacing)
	}
	b.StopTimer()
	p50, p99 := percentiles(sdkLat)
	e50, e99 := percentiles(rawLat)
	b.ReportMetric(p50, "p50-ms")
	b.ReportMetric(p99, "p99-ms")
	b.ReportMetric(e50, "etcd-p50-ms")
	b.ReportMetric(e99, "etcd-p99-ms")
	if e99 > 0 {
		b.ReportMetric(p99/e99, "p99-ratio")
	}
	b.ReportMetric(0, "ns/op")
}

// percentiles returns p50 and p99 of ds in milliseconds.
func percentiles(ds []time.Duration) (p50, p99 float64) {
	if len(ds) == 0 {
		return 0, 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	at := func(q float64) float64 {
		return float64(s[min(len(s)-1, int(q*float64(len(s))))]) / float64(time.Millisecond)
	}
	return at(0.50), at(0.99)
}
