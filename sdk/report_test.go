package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"
	"unsafe"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/switchyard-io/switchyard/internal/etcdtest"
	"github.com/switchyard-io/switchyard/sdk/ack"
	"github.com/switchyard-io/switchyard/sdk/limit"
	"github.com/switchyard-io/switchyard/sdk/wire"
)

var reportT0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// publishLive applies switches and limit rules to c as live data at rev.
func publishLive(t testing.TB, c *Client, rev int64, sws []*wire.Switch, rules ...wire.LimitRule) {
	t.Helper()
	var ups []kvUpdate
	for _, sw := range sws {
		ups = append(ups, kvUpdate{key: wire.SwitchKey(c.cfg.Namespace, sw.App, sw.Name), value: []byte(mustJSON(t, sw)), modRev: rev})
	}
	for _, r := range rules {
		ups = append(ups, kvUpdate{key: wire.LimitKey(c.cfg.Namespace, r.App, r.Resource), value: []byte(mustJSON(t, r)), modRev: rev})
	}
	c.apply(ups, false, rev, SourceLive)
}

// fakeReporter is a reporter of c on a clock the test moves.
type fakeReporter struct {
	*reporter
	t   *testing.T
	now time.Time
}

func newFakeReporter(t *testing.T, c *Client) *fakeReporter {
	f := &fakeReporter{t: t, now: reportT0}
	f.reporter = newReporter(c, func() time.Time { return f.now })
	return f
}

// write takes a report, commits it as written and returns the value.
func (f *fakeReporter) write(ack bool) wire.Instance {
	f.t.Helper()
	d := f.take(f.now)
	if len(d.value) > wire.MaxReportBytes {
		f.t.Fatalf("instance value of %d bytes, over %d", len(d.value), wire.MaxReportBytes)
	}
	f.commit(d, f.now, ack)
	var inst wire.Instance
	if err := json.Unmarshal(d.value, &inst); err != nil || inst.Report == nil {
		f.t.Fatalf("value %s: %v", d.value, err)
	}
	return inst
}

func TestLatencyBuckets(t *testing.T) {
	if latencyBuckets != len(wire.LatencyBuckets)+1 {
		t.Fatalf("latencyBuckets = %d, want len(wire.LatencyBuckets)+1 = %d", latencyBuckets, len(wire.LatencyBuckets)+1)
	}
	for _, tc := range []struct {
		d    time.Duration
		want int
	}{{0, 0}, {time.Millisecond, 0}, {time.Millisecond + 1, 1}, {20 * time.Millisecond, 4}, {2 * time.Second, 10}, {time.Hour, 11}} {
		if got := latencyBucket(tc.d); got != tc.want {
			t.Errorf("latencyBucket(%v) = %d, want %d", tc.d, got, tc.want)
		}
	}
}

// TestSwitchSignalsLayout: the counters of a switch sit on cache lines of
// their own, apart from the read flag every check loads.
func TestSwitchSignalsLayout(t *testing.T) {
	var s switchSignals
	if size := unsafe.Sizeof(s); size%cacheLine != 0 {
		t.Errorf("switchSignals is %d bytes, not whole cache lines", size)
	}
	if off := unsafe.Offsetof(s.degraded); off < cacheLine {
		t.Errorf("degraded at offset %d shares the read flag's cache line", off)
	}
	c := newTestClient(t, Config{})
	for i := range 100 {
		if p := uintptr(unsafe.Pointer(c.Switch(fmt.Sprint("s", i)).sig)); p%cacheLine != 0 {
			t.Fatalf("switchSignals allocated at %#x, not on a cache line", p)
		}
	}
}

// TestReportBounded: with 1,000 switches read, a report stays within
// wire.MaxReportBytes and counts the rest as pending; degraded switches go
// first; the following reports bring out every entry, within the bound
// the first report's size implies; then nothing is left to report.
func TestReportBounded(t *testing.T) {
	c := newTestClient(t, Config{})
	const n = 1000
	var sws []*wire.Switch
	for i := range n {
		st := wire.StateOff
		if i%20 == 0 {
			st = wire.StateOn // 50 degraded switches
		}
		sws = append(sws, mkSwitch("checkout", fmt.Sprintf("switch-%04d-with-a-rather-long-name", i), st, 100))
	}
	publishLive(t, c, 5, sws)
	ctx := context.Background()
	for _, sw := range sws {
		c.Switch(sw.Name).On(ctx)
	}
	c.Switch("never-read") // a handle alone is not a read
	r := newFakeReporter(t, c)

	first := r.write(false).Report
	perReport := len(first.Switches)
	if first.Pending == 0 || perReport+first.Pending != n {
		t.Fatalf("first report: %d entries, %d pending; want some pending and %d in all", perReport, first.Pending, n)
	}
	for i := 0; i < n; i += 20 {
		if _, ok := first.Switches[sws[i].Name]; !ok {
			t.Fatalf("degraded switch %s not in the first report", sws[i].Name)
		}
	}
	seen := map[string]bool{}
	for name, s := range first.Switches {
		seen[name] = true
		if s.LastRead != reportT0.Unix() {
			t.Fatalf("%s: last read %d, want %d", name, s.LastRead, reportT0.Unix())
		}
	}
	bound := (n+perReport-1)/perReport + 1
	reports := 1
	for pending := first.Pending; pending > 0; reports++ {
		if reports > bound {
			t.Fatalf("%d entries still pending after %d reports (bound %d)", pending, reports, bound)
		}
		r.now = r.now.Add(10 * time.Second)
		rep := r.write(false).Report
		for name := range rep.Switches {
			if seen[name] {
				t.Fatalf("%s reported again while others wait", name)
			}
			seen[name] = true
		}
		pending = rep.Pending
	}
	if len(seen) != n || seen["never-read"] {
		t.Fatalf("%d switches reported, want the %d read ones", len(seen), n)
	}
	r.now = r.now.Add(10 * time.Second)
	if r.news(r.now) {
		t.Fatal("news after everything was reported")
	}
}

// TestReportRotation: when more entries change every interval than fit,
// every one still gets out within a bounded number of reports, including
// the ones behind the degraded-counter changes that go first.
func TestReportRotation(t *testing.T) {
	c := newTestClient(t, Config{})
	const n, degraded = 1000, 400 // the degraded changes alone overflow a report
	var sws []*wire.Switch
	for i := range n {
		st := wire.StateOff
		if i < degraded {
			st = wire.StateOn
		}
		sws = append(sws, mkSwitch("checkout", fmt.Sprintf("switch-%04d-with-a-rather-long-name", i), st, 100))
	}
	publishLive(t, c, 5, sws)
	ctx := context.Background()
	hs := make([]*Handle, n)
	for i, sw := range sws {
		hs[i] = c.Switch(sw.Name)
	}
	r := newFakeReporter(t, c)
	last := map[string]int{} // switch -> last report that carried it
	const reports = 12
	for k := 1; k <= reports; k++ {
		for _, h := range hs {
			h.On(ctx) // every degraded counter moves, every off switch is read
		}
		rep := r.write(false).Report
		if rep.Pending == 0 {
			t.Fatalf("report %d: nothing pending, the test needs an overflow", k)
		}
		for name := range rep.Switches {
			last[name] = k
		}
		r.now = r.now.Add(10 * time.Second)
	}
	for i, sw := range sws {
		if i < degraded {
			// Degraded changes rotate among themselves: each waits at most
			// a few reports.
			if k, ok := last[sw.Name]; !ok || reports-k > 4 {
				t.Errorf("degraded %s last reported in report %d of %d", sw.Name, k, reports)
			}
		} else if _, ok := last[sw.Name]; !ok {
			t.Errorf("read-only %s never reported in %d reports", sw.Name, reports)
		}
	}
}

// TestReportCountersExact: degraded answers through handles, by name and
// through the middleware, L1 fallbacks served, degraded-path latencies,
// limiter decisions and breaker state appear exactly in the report; a
// switch never read is absent, one read but never on has only its last
// read.
func TestReportCountersExact(t *testing.T) {
	c := newTestClient(t, Config{})
	reco := mkSwitch("checkout", "reco", wire.StateOn, 100)
	reco.Level, reco.Fallback = wire.L1, []byte(`{"items":[]}`)
	clock := limit.NewFakeClock()
	bucket := rule("GET /x", wire.KindTokenBucket)
	bucket.Rate, bucket.Burst = 1, 5
	shadow := rule("GET /y", wire.KindTokenBucket)
	shadow.Rate, shadow.Burst, shadow.Mode = 1, 2, wire.ModeShadow
	breaker := rule("POST /pay", wire.KindBreaker)
	breaker.ErrorRate, breaker.MinRequests, breaker.Window = 0.5, 2, wire.Duration(10*time.Second)
	breaker.OpenDuration, breaker.HalfOpenProbes = wire.Duration(time.Minute), 1
	publishLive(t, c, 7, []*wire.Switch{reco, mkSwitch("checkout", "calm", wire.StateOff, 100), mkSwitch("checkout", "idle", wire.StateOn, 100)},
		bucket, shadow, breaker)
	ctx := context.Background()

	a, b := c.Switch("reco"), c.Switch("reco")
	for range 10 {
		a.On(ctx)
	}
	for range 5 {
		b.On(ctx)
	}
	for range 7 {
		c.On(ctx, "reco")
	}
	var v struct{ Items []string }
	for range 4 {
		if err := a.Fallback(&v); err != nil {
			t.Fatal(err)
		}
	}
	calm := c.Switch("calm")
	for range 100 {
		calm.On(ctx)
		c.On(ctx, "calm")
	}
	c.Switch("idle")
	mw := c.Middleware(MiddlewareOptions{Switches: []*Handle{a, calm}})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for range 13 {
		mw.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/page", nil))
	}

	x := c.Limiter("GET /x", LimitClock(clock))
	for range 8 {
		x.Allow(ctx)
	}
	y := c.Limiter("GET /y", LimitClock(clock))
	for range 5 {
		y.Allow(ctx)
	}
	pay := c.Limiter("POST /pay", LimitClock(clock))
	fail := errors.New("down")
	for range 3 {
		pay.Do(ctx, func(context.Context) error { return fail })
	}

	r := newFakeReporter(t, c)
	rep := r.write(false).Report
	if rep.At != reportT0.Unix() || rep.Pending != 0 {
		t.Fatalf("report at %d pending %d", rep.At, rep.Pending)
	}
	got := rep.Switches["reco"]
	var timed uint64
	for _, n := range got.Latency {
		timed += n
	}
	if got.Degraded != 10+5+7+13 || got.Fallbacks != 4 || timed != 13 || len(got.Latency) != latencyBuckets || got.LastRead != rep.At {
		t.Errorf("reco: %+v (timed %d), want 35 degraded, 4 fallbacks, 13 timed", got, timed)
	}
	if s, ok := rep.Switches["calm"]; !ok || s.Degraded != 0 || s.Fallbacks != 0 || s.Latency != nil || s.LastRead != rep.At {
		t.Errorf("calm: %+v, want only its last read", rep.Switches["calm"])
	}
	if _, ok := rep.Switches["idle"]; ok {
		t.Error("a switch never read is reported")
	}
	for res, want := range map[string]wire.LimitSignal{
		"GET /x":    {Allowed: 5, Rejected: 3},
		"GET /y":    {Allowed: 2, ShadowRejected: 3},
		"POST /pay": {Allowed: 2, Rejected: 1, Breaker: wire.BreakerOpen},
	} {
		if got := rep.Limits[res]; got != want {
			t.Errorf("%s: %+v, want %+v", res, got, want)
		}
	}

	// Unchanged since: nothing to report. One more degraded answer: only
	// that entry.
	r.now = r.now.Add(10 * time.Second)
	if r.news(r.now) {
		t.Fatal("news without any change")
	}
	a.On(ctx)
	rep = r.write(false).Report
	if len(rep.Switches) != 1 || rep.Switches["reco"].Degraded != 36 || len(rep.Limits) != 0 {
		t.Fatalf("second report %+v, want reco alone at 36", rep)
	}
	if got := c.instance().Stats["fallbacks_served"]; got != 0 {
		t.Errorf("legacy fallbacks_served = %d: every answer had a published value", got)
	}
}

// TestReportPolicy drives the policy on a fake clock: a flood of counter
// changes writes at most one report per interval; nothing changed writes
// nothing (after one quiet report that settles the rates); an applied
// revision is acked at once with a report, followed by at most one
// follow-up as soon as the flipped switch's counters move.
func TestReportPolicy(t *testing.T) {
	const interval = 10 * time.Second
	c := newTestClient(t, Config{ReportInterval: interval})
	publishLive(t, c, 3, []*wire.Switch{mkSwitch("checkout", "reco", wire.StateOn, 100), mkSwitch("checkout", "other", wire.StateOn, 100)})
	c.takeTouched()
	ctx := context.Background()
	reco, other := c.Switch("reco"), c.Switch("other")
	r := newFakeReporter(t, c)
	r.nextAt = r.after(r.now)
	var writes []time.Time
	var last wire.Instance
	// poll advances the clock by 250 ms steps for d, calling traffic at each
	// step, and writes whenever the policy says so.
	poll := func(d time.Duration, ack func() bool, traffic func()) {
		for end := r.now.Add(d); r.now.Before(end); r.now = r.now.Add(250 * time.Millisecond) {
			if traffic != nil {
				traffic()
			}
			why := r.due(r.now, false, ack != nil && ack())
			if why != reportNone {
				last = r.write(why == reportAck)
				writes = append(writes, r.now)
			}
		}
	}
	flood := func() {
		for range 100 {
			reco.On(ctx)
		}
	}

	poll(100*time.Second, nil, flood)
	if len(writes) < 8 || len(writes) > 11 {
		t.Fatalf("%d writes in 100 s of changes, want one per 10–12 s", len(writes))
	}
	for i := 1; i < len(writes); i++ {
		if gap := writes[i].Sub(writes[i-1]); gap < interval {
			t.Fatalf("writes %v apart, less than the interval", gap)
		}
	}

	// The flood stops: at most the final counters, then one quiet report,
	// then nothing.
	writes = nil
	poll(100*time.Second, nil, nil)
	if len(writes) == 0 || len(writes) > 2 || len(last.Report.Switches) != 0 || last.Report.Pending != 0 {
		t.Fatalf("after the changes stopped: %d writes, last %+v; want at most 2, the last one empty", len(writes), last.Report)
	}
	// Every periodic check after the last write found nothing, and checks
	// come at most one interval plus the largest jitter apart.
	quiet := r.now.Sub(writes[len(writes)-1])
	maxGap := time.Duration(float64(interval) * (1 + reportJitter))
	if skips, want := r.skips.Load(), uint64(quiet/maxGap); skips < want || want < 5 {
		t.Fatalf("%d periodic checks found nothing in the last %v without writes, want at least %d (and that at least 5)", skips, quiet, want)
	}

	// A new revision flips reco: acked at once, with a report.
	publishLive(t, c, 9, []*wire.Switch{mkSwitch("checkout", "reco", wire.StateOff, 100)})
	publishLive(t, c, 10, []*wire.Switch{mkSwitch("checkout", "reco", wire.StateOn, 100)})
	writes = nil
	acked := false
	poll(time.Second, func() bool { was := acked; acked = true; return !was }, nil)
	if len(writes) != 1 || last.Report == nil || last.AppliedRevision != 10 {
		t.Fatalf("ack: %d writes, last %+v", len(writes), last)
	}
	// Another switch's counters move: no follow-up.
	writes = nil
	poll(2*time.Second, nil, func() { other.On(ctx) })
	if len(writes) != 0 {
		t.Fatalf("a follow-up for a switch the revision did not touch")
	}
	// reco's move: one follow-up, at once, then nothing until the interval.
	poll(3*time.Second, nil, func() { reco.On(ctx) })
	if len(writes) != 1 || last.Report.Switches["reco"].Degraded == 0 {
		t.Fatalf("follow-up: %d writes, last %+v; want one carrying reco", len(writes), last.Report)
	}
	poll(5*time.Second, nil, func() { reco.On(ctx) })
	if len(writes) != 1 {
		t.Fatalf("%d writes within the interval after a follow-up, want 1", len(writes))
	}

	// The follow-up window closes 5 s after the ack.
	publishLive(t, c, 11, []*wire.Switch{mkSwitch("checkout", "reco", wire.StateOff, 100)})
	acked = false
	writes = nil
	poll(time.Second, func() bool { was := acked; acked = true; return !was }, nil)
	r.nextAt = r.now.Add(time.Hour) // no periodic report in what follows
	poll(5*time.Second, nil, nil)
	publishLive(t, c, 12, []*wire.Switch{mkSwitch("checkout", "reco", wire.StateOn, 100)}) // touched, but no ack yet
	poll(5*time.Second, nil, func() { reco.On(ctx) })
	if len(writes) != 1 {
		t.Fatalf("%d writes, want the ack alone: counters that move after the window wait for the interval", len(writes))
	}
}

// instanceWrites records every write of an instance key from the moment
// it is called.
type instanceWrites struct {
	mu     sync.Mutex
	writes []instanceWrite
}

type instanceWrite struct {
	at      time.Time
	version int64
	inst    wire.Instance
}

func watchInstance(t *testing.T, cli *clientv3.Client, key string) *instanceWrites {
	t.Helper()
	w := &instanceWrites{}
	ctx, cancel := context.WithCancel(context.Background())
	resp, err := cli.Get(ctx, key)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	ch := cli.Watch(ctx, key, clientv3.WithRev(resp.Header.Revision+1))
	done := make(chan struct{})
	go func() {
		defer close(done)
		for wr := range ch {
			for _, ev := range wr.Events {
				if ev.Type != clientv3.EventTypePut {
					continue
				}
				var inst wire.Instance
				if err := json.Unmarshal(ev.Kv.Value, &inst); err != nil {
					t.Errorf("instance value %s: %v", ev.Kv.Value, err)
					continue
				}
				w.mu.Lock()
				w.writes = append(w.writes, instanceWrite{at: time.Now(), version: ev.Kv.Version, inst: inst})
				w.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return w
}

func (w *instanceWrites) all() []instanceWrite {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.writes)
}

// traffic calls h.On about every millisecond until the returned stop is
// called (at the latest after a minute).
func traffic(h *Handle) (stop func()) {
	done, quit := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		end := time.After(time.Minute)
		ctx := context.Background()
		for {
			select {
			case <-quit:
				return
			case <-end:
				return
			case <-tick.C:
				for range 10 {
					h.On(ctx)
				}
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(quit); <-done }) }
}

// TestRegistryReportsDebounced (real etcd, 1 s interval): under a flood of
// degraded answers the instance key is written at most once per interval,
// each report with higher counters; when the answers stop, the final
// counters and one quiet report follow, and then nothing while nothing
// changes.
func TestRegistryReportsDebounced(t *testing.T) {
	srv := etcdtest.Start(t)
	cli := srv.Client(t)
	const ns, app, interval = "test", "checkout", time.Second
	rev := putSwitch(t, cli, ns, mkSwitch(app, "reco", wire.StateOn, 100))
	c := newTestClient(t, Config{Endpoints: []string{srv.Endpoint}, Namespace: ns, App: app, InstanceID: "i1", ReportInterval: interval})
	key := wire.InstanceKey(ns, app, "i1")
	waitFor(t, 10*time.Second, "registered with the applied revision", func() bool {
		var inst wire.Instance
		v, ok := srv.Get(t, cli, key)
		return ok && json.Unmarshal([]byte(v), &inst) == nil && inst.AppliedRevision >= rev &&
			inst.ReportInterval.D() == interval && inst.Report != nil
	})
	start := time.Now()
	w := watchInstance(t, cli, key)
	stop := traffic(c.Switch("reco"))
	defer stop()
	waitFor(t, 15*time.Second, "five reports", func() bool { return len(w.all()) >= 5 })
	stop()
	elapsed := time.Since(start)
	writes := w.all()
	// n writes at least an interval apart take (n-1) intervals, and all
	// were written since start. (The watch's receipt times are no
	// measure: a consumer that is late for a moment receives queued writes
	// together.)
	if most := int(elapsed/interval) + 1; len(writes) > most {
		t.Fatalf("%d writes in %v, at most %d at one per %v", len(writes), elapsed.Round(time.Millisecond), most, interval)
	}
	var prev uint64
	for i, wr := range writes {
		d := wr.inst.Report.Switches["reco"].Degraded
		if d <= prev {
			t.Fatalf("report %d: reco degraded %d after %d", i, d, prev)
		}
		prev = d
		if i > 0 && wr.version != writes[i-1].version+1 {
			t.Fatalf("versions %d then %d: a write was not seen", writes[i-1].version, wr.version)
		}
	}
	final := c.Switch("reco").sig.degraded.Load()
	waitFor(t, 5*time.Second, "the final counters, then a quiet report", func() bool {
		all := w.all()
		n := len(all)
		return n >= 2 && all[n-2].inst.Report.Switches["reco"].Degraded == final &&
			len(all[n-1].inst.Report.Switches) == 0 && all[n-1].inst.Report.Pending == 0
	})
	quiet := len(w.all())
	skips := c.report.skips.Load()
	waitFor(t, 10*time.Second, "two periodic checks with nothing to report", func() bool { return c.report.skips.Load() >= skips+2 })
	if n := len(w.all()); n != quiet {
		t.Fatalf("%d writes while nothing changed", n-quiet)
	}
}

// TestRegistryAckAndFollowUp (real etcd, 1 min interval so that only acks
// and follow-ups write): a flip is acked promptly with a report, and the
// flipped switch's degraded counters follow in one more report within 5 s
// of the flip; then nothing more is written, though the counters move on.
func TestRegistryAckAndFollowUp(t *testing.T) {
	srv := etcdtest.Start(t)
	cli := srv.Client(t)
	const ns, app = "test", "checkout"
	rev := putSwitch(t, cli, ns, mkSwitch(app, "reco", wire.StateOff, 100))
	c := newTestClient(t, Config{Endpoints: []string{srv.Endpoint}, Namespace: ns, App: app, InstanceID: "i1", ReportInterval: time.Minute})
	key := wire.InstanceKey(ns, app, "i1")
	waitFor(t, 10*time.Second, "registered with the applied revision", func() bool {
		var inst wire.Instance
		v, ok := srv.Get(t, cli, key)
		return ok && json.Unmarshal([]byte(v), &inst) == nil && inst.AppliedRevision >= rev
	})
	w := watchInstance(t, cli, key)
	stop := traffic(c.Switch("reco"))
	defer stop()

	flipped := time.Now()
	rev = putSwitch(t, cli, ns, mkSwitch(app, "reco", wire.StateOn, 100))
	// Every write but the follow-up acks a newer revision than the write
	// before it (the first acks the flip; the registry may confirm a later
	// revision after its own write).
	reports := func() (first instanceWrite, own []instanceWrite) {
		all := w.all()
		if len(all) == 0 {
			return first, nil
		}
		for i := 1; i < len(all); i++ {
			if all[i].inst.AppliedRevision <= all[i-1].inst.AppliedRevision {
				own = append(own, all[i])
			}
		}
		return all[0], own
	}
	waitFor(t, 5*time.Second, "the follow-up report within 5 s of the flip", func() bool {
		_, own := reports()
		return len(own) > 0
	})
	first, own := reports()
	follow := own[0]
	// The ack waits for a quiet spell of ack.Quiet plus up to ack.Spread.
	if first.inst.AppliedRevision < rev || first.inst.Report == nil || first.at.Sub(flipped) > ack.Quiet+ack.Spread+500*time.Millisecond {
		t.Fatalf("ack %+v at %v after the flip", first.inst, first.at.Sub(flipped))
	}
	if follow.inst.Report.At <= first.inst.Report.At || follow.inst.Report.Switches["reco"].Degraded <= first.inst.Report.Switches["reco"].Degraded {
		t.Errorf("follow-up %+v after ack %+v: want later, with more degraded answers", follow.inst.Report, first.inst.Report)
	}
	t.Logf("ack %v, follow-up %v after the flip", first.at.Sub(flipped), follow.at.Sub(flipped))
	// Past the follow-up window, with the counters still moving, nothing
	// else is written before the interval.
	checks := c.report.checks.Load()
	waitFor(t, 20*time.Second, "the follow-up window to pass", func() bool {
		return c.report.checks.Load() >= checks+12 && time.Since(follow.at) > followUpWindow
	})
	if _, own = reports(); len(own) != 1 {
		t.Errorf("%d reports after the ack, want the one follow-up", len(own))
	}
}
