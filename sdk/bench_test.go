package sdk

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"unsafe"

	"github.com/switchyard-io/switchyard/internal/etcdtest"
	"github.com/switchyard-io/switchyard/sdk/wire"
)

var sink bool

// benchClient is an offline client holding n live switches sw-0 … sw-(n-1),
// on at 50 %, with the given stickiness.
func benchClient(b *testing.B, n int, stickiness string) *Client {
	b.Helper()
	c, err := New(context.Background(), Config{Namespace: "bench", App: "checkout", InstanceID: "inst-7", Logger: discard})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	ups := make([]kvUpdate, n)
	for i := range ups {
		sw := mkSwitch("checkout", fmt.Sprintf("sw-%d", i), wire.StateOn, 50)
		sw.Rollout.Stickiness = stickiness
		ups[i] = kvUpdate{key: wire.SwitchKey("bench", "checkout", sw.Name), value: []byte(mustJSON(b, sw)), modRev: 1}
	}
	c.apply(ups, true, 1, SourceLive)
	return c
}

// The handle benchmarks check sw-42, off for inst-7 (bucket 9698 of a
// 50 % rollout), and sw-41, on for it (bucket 3941): the not-degraded and
// the degraded answer.
const (
	benchOff = "sw-42"
	benchOn  = "sw-41"
)

// benchHandle is the handle of name, checked to answer want.
func benchHandle(b *testing.B, name string, want bool) *Handle {
	b.Helper()
	h := benchClient(b, 100, wire.StickyInstance).Switch(name)
	if h.On(context.Background()) != want {
		b.Fatalf("%s answers %v for inst-7, want %v", name, !want, want)
	}
	return h
}

// benchPtr is the baseline of the handle benchmarks: On is an atomic load
// of the state pointer plus field reads.
var benchPtr = unsafe.Pointer(new(int))

func BenchmarkAtomicLoad(b *testing.B) {
	b.ReportAllocs()
	var on bool
	for i := 0; i < b.N; i++ {
		on = atomic.LoadPointer(&benchPtr) != nil
	}
	sink = on
}

func BenchmarkAtomicLoadParallel(b *testing.B) {
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var on bool
		for pb.Next() {
			on = atomic.LoadPointer(&benchPtr) != nil
		}
		sink = on
	})
}

func BenchmarkSwitchOn(b *testing.B) {
	h := benchHandle(b, benchOff, false)
	ctx := context.Background()
	b.ReportAllocs()
	var on bool
	for i := 0; i < b.N; i++ {
		on = h.On(ctx)
	}
	sink = on
}

func BenchmarkSwitchOnParallel(b *testing.B) {
	h := benchHandle(b, benchOff, false)
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var on bool
		for pb.Next() {
			on = h.On(ctx)
		}
		sink = on
	})
}

// BenchmarkSwitchOnDegraded is the degraded answer, which counts.
func BenchmarkSwitchOnDegraded(b *testing.B) {
	h := benchHandle(b, benchOn, true)
	ctx := context.Background()
	b.ReportAllocs()
	var on bool
	for i := 0; i < b.N; i++ {
		on = h.On(ctx)
	}
	sink = on
}

// BenchmarkSwitchOnDegradedParallel has every goroutine count on the same
// switch's counter: the worst case of a degraded answer.
func BenchmarkSwitchOnDegradedParallel(b *testing.B) {
	h := benchHandle(b, benchOn, true)
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var on bool
		for pb.Next() {
			on = h.On(ctx)
		}
		sink = on
	})
}

func BenchmarkSwitchOnKey(b *testing.B) {
	h := benchClient(b, 100, wire.StickyKey).Switch(benchOff)
	ctx := WithKey(context.Background(), "tenant-42")
	b.ReportAllocs()
	var on bool
	for i := 0; i < b.N; i++ {
		on = h.On(ctx)
	}
	sink = on
}

func BenchmarkSwitchOnKeyParallel(b *testing.B) {
	h := benchClient(b, 100, wire.StickyKey).Switch(benchOff)
	ctx := WithKey(context.Background(), "tenant-42")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var on bool
		for pb.Next() {
			on = h.On(ctx)
		}
		sink = on
	})
}

func BenchmarkSwitchByName(b *testing.B) {
	c := benchClient(b, 100, wire.StickyInstance)
	ctx := context.Background()
	b.ReportAllocs()
	var on bool
	for i := 0; i < b.N; i++ {
		on = c.On(ctx, benchOff)
	}
	sink = on
}

func BenchmarkSwitchByNameParallel(b *testing.B) {
	c := benchClient(b, 100, wire.StickyInstance)
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var on bool
		for pb.Next() {
			on = c.On(ctx, benchOff)
		}
		sink = on
	})
}

// BenchmarkColdStart measures New with etcd unreachable and a
// 10,000-switch disk snapshot, until the first answer.
func BenchmarkColdStart(b *testing.B) {
	const ns, app, n = "bench", "checkout", 10000
	dir := b.TempDir()
	sws := make([]*wire.Switch, n)
	for i := range sws {
		sws[i] = mkSwitch(app, fmt.Sprintf("switch-%05d", i), wire.StateOn, float64(i%101))
		sws[i].Rollout.Selector = "zone=a"
	}
	writeSnapshot(b, dir, ns, app, 12345, sws...)
	down := "http://" + etcdtest.FreeAddr(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		c, err := New(ctx, Config{Endpoints: []string{down}, Namespace: ns, App: app, SnapshotDir: dir,
			Labels: map[string]string{"zone": "a"}, Logger: discard})
		if err != nil {
			b.Fatal(err)
		}
		h := c.Switch("switch-09999")
		if h.Source() != SourceSnapshot || c.Revision() != 12345 {
			b.Fatalf("not from snapshot: %v rev %d", h.Source(), c.Revision())
		}
		sink = h.On(ctx)
		b.StopTimer()
		c.Close()
		b.StartTimer()
	}
}
