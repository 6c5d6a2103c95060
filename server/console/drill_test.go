package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"gorm.io/gorm"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/internal/promtest"
	"github.com/switchyard-io/switchyard/internal/servertest"
	"github.com/switchyard-io/switchyard/sdk"
	"github.com/switchyard-io/switchyard/server/console"
	"github.com/switchyard-io/switchyard/server/drill"
)

// The kinds of probe target a drill test runs: services that embed the SDK
// and serve GET /recommendations, degraded by switch "recommend".
const (
	svcCorrect   = "correct"   // fallback {"items":[],"source":"fallback"}: the same shape as the live answer
	svcDropField = "dropfield" // fallback {"items":[]}: drops the required /source
	svcSlow      = "slow"      // the degraded path sleeps 50 ms (a fallback that queries a database)
	svcCached    = "cached"    // reads the switch once at start and caches it: never degrades
	svcHang      = "hang"      // the degraded path never answers (until the test ends)
)

// drillTarget is one app of SDK instances, each behind its own HTTP
// server, with traffic on every instance until the test ends.
type drillTarget struct {
	app     string
	clients []*sdk.Client
	urls    []string
	// hanging counts the requests svcHang holds now; release lets them go.
	hanging atomic.Int64
	release chan struct{}
}

// startDrillTarget starts n instances of app of the given kind on the
// env's etcd, reporting every second, and sends each a request every 20 ms.
func startDrillTarget(t testing.TB, e *env, app, kind string, n int) *drillTarget {
	t.Helper()
	dt := &drillTarget{app: app, release: make(chan struct{})}
	for i := range n {
		c, err := sdk.New(context.Background(), sdk.Config{Endpoints: []string{e.etcd.Endpoint}, Namespace: "default", App: app,
			InstanceID: fmt.Sprintf("%s-%d", app, i), ReportInterval: time.Second, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		h := c.Switch("recommend")
		cachedOn := h.On(context.Background())
		serve := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			degraded := sdk.DegradedLevel(r.Context()) != ""
			if kind == svcCached {
				degraded = cachedOn
			}
			w.Header().Set("Content-Type", "application/json")
			switch {
			case !degraded:
				_, _ = io.WriteString(w, `{"items":[{"id":"a1","title":"Lamp"}],"source":"live"}`)
			case kind == svcDropField:
				_, _ = io.WriteString(w, `{"items":[]}`)
			case kind == svcSlow:
				time.Sleep(50 * time.Millisecond)
				_, _ = io.WriteString(w, `{"items":[],"source":"fallback"}`)
			case kind == svcHang:
				dt.hanging.Add(1)
				defer dt.hanging.Add(-1)
				select {
				case <-r.Context().Done():
				case <-dt.release:
				}
			default:
				_, _ = io.WriteString(w, `{"items":[],"source":"fallback"}`)
			}
		})
		var opts sdk.MiddlewareOptions
		if kind != svcCached {
			opts.Switches = []*sdk.Handle{h}
		}
		srv := httptest.NewServer(c.Middleware(opts)(serve))
		t.Cleanup(srv.Close)
		e.allowEgress(srv.Listener.Addr().String())
		dt.clients, dt.urls = append(dt.clients, c), append(dt.urls, srv.URL+"/recommendations")
	}
	for _, c := range dt.clients {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := c.WaitReady(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
	keepCalling(t, dt.urls...)
	// Registered last, so it runs first: the hanging requests end before
	// the traffic stops and the servers close.
	t.Cleanup(func() { close(dt.release) })
	return dt
}

// keepCalling GETs each URL every 20 ms until the test ends, as a
// service's callers do, so that its instances count reads.
func keepCalling(t testing.TB, urls ...string) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
				for _, u := range urls {
					if res, err := http.Get(u); err == nil {
						_, _ = io.Copy(io.Discard, res.Body)
						res.Body.Close()
					}
				}
			}
		}
	}()
	t.Cleanup(func() { close(quit); <-done })
}

// steadyLeader gives the console's election a 5 s session: on a loaded
// test machine a 1 s session (etcd makes it 2 s) expires now and then,
// which ends a drill in progress as interrupted — right, but not what
// these tests look at (TestDrillLeaderKilled does).
func steadyLeader(c *console.Config) { c.ElectionTTL = 5 * time.Second }

// seedDrill creates switch recommend (L1) of app and drill "reco" on it
// probing url, with extra JSON members for the drill.
func seedDrill(t testing.TB, c *console.Console, app, url, extra string) {
	t.Helper()
	mustStatus(t, call(t, c, "POST", "/api/v1/apps/"+app+"/switches", adminToken,
		`{"name":"recommend","level":"L1","fallback":{"items":[],"source":"fallback"},"reason":"seed"}`), 201)
	body := `{"name":"reco","switch":"recommend","target":{"percent":100},"duration":"8s","recover_within":"30s",` +
		`"probes":[{"url":"` + url + `","required_fields":["/items","/source"],"requests":20}],"reason":"monthly drill"` + extra + `}`
	mustStatus(t, call(t, c, "POST", "/api/v1/apps/"+app+"/drills", adminToken, body), 201)
}

// waitInstances waits until the console's fleet model sees n instances of app.
func waitInstances(t testing.TB, c *console.Console, app string, n int) {
	t.Helper()
	servertest.Eventually(t, 15*time.Second, fmt.Sprintf("%d instances of %s", n, app), func() bool {
		return c.Fleet.Synced() && len(c.Fleet.Instances(app)) == n
	})
}

// runView fetches run n of drill reco of app.
func runView(t *testing.T, c *console.Console, app string, n int) drill.RunView {
	t.Helper()
	r := mustStatus(t, call(t, c, "GET", fmt.Sprintf("/api/v1/apps/%s/drills/reco/runs/%d", app, n), adminToken, ""), 200)
	var out struct{ Run drill.RunView }
	if err := json.Unmarshal([]byte(r.Raw), &out); err != nil {
		t.Fatal(err)
	}
	return out.Run
}

// waitRun waits until run n of app's drill has finished and returns it.
func waitRun(t *testing.T, c *console.Console, app string, n int, within time.Duration) drill.RunView {
	t.Helper()
	var v drill.RunView
	servertest.Eventually(t, within, fmt.Sprintf("run %s #%d finishes", app, n), func() bool {
		v = runView(t, c, app, n)
		return v.FinishedAt != nil
	})
	return v
}

func logVerdicts(t *testing.T, v drill.RunView) {
	t.Helper()
	t.Logf("%s: %s", v.Cause, v.Summary)
	if vs := v.Progress.Verdicts; vs != nil {
		for name, x := range map[string]drill.Verdict{"takes_effect": vs.TakesEffect, "fallback_correct": vs.FallbackCorrect, "fast": vs.Fast, "recovers": vs.Recovers} {
			t.Logf("  %s: %s — %s", name, x.Result, x.Summary)
			for _, d := range x.Details {
				t.Logf("      %s", d)
			}
		}
	}
}

// TestDrillVerdicts: one drill of an L1 switch on four services, run at
// once on four apps. The service whose fallback is correct passes all four
// checks; the one whose fallback drops a required field fails "fallback
// correct" with the offending body; the one whose degraded path sleeps
// 50 ms fails "fast"; the one that caches the switch fails "takes effect"
// naming its instances. No run changes the stored switch, every run is
// audited as actor drill with its cause, the failures open drill_failed
// findings and notify, the pass notifies.
func TestDrillVerdicts(t *testing.T) {
	e := newEnv(t)
	e.log = slog.New(slog.NewTextHandler(testWriter{t}, nil))
	c := e.start(steadyLeader)
	waitLeader(t, c)
	kinds := []string{svcCorrect, svcDropField, svcSlow, svcCached}
	for _, k := range kinds {
		app := "shop-" + k
		dt := startDrillTarget(t, e, app, k, 2)
		seedDrill(t, c, app, dt.urls[0], "")
		waitInstances(t, c, app, 2)
	}
	for _, k := range kinds {
		r := mustStatus(t, call(t, c, "POST", "/api/v1/apps/shop-"+k+"/drills/reco/runs", adminToken, `{"reason":"must-show drill"}`), 202)
		if r.str("run", "phase") != drill.PhasePending || r.num("run", "number") != 1 {
			t.Fatalf("run: %s", r.Raw)
		}
	}
	runs := map[string]drill.RunView{}
	for _, k := range kinds {
		runs[k] = waitRun(t, c, "shop-"+k, 1, 60*time.Second)
		logVerdicts(t, runs[k])
		if runs[k].Progress.Verdicts == nil || len(runs[k].Progress.Degraded) == 0 {
			t.Fatalf("%s: no verdicts (outcome %s: %s)", k, runs[k].Outcome, runs[k].Summary)
		}
	}

	good := runs[svcCorrect]
	if good.Outcome != drill.OutcomePassed {
		t.Errorf("correct fallback: outcome %s (%s)", good.Outcome, good.Summary)
	}
	for _, ev := range good.Progress.Instances {
		if ev.RoseAfterMS == nil || *ev.RoseAfterMS > 5000 {
			t.Errorf("correct fallback: an instance did not rise within 5 s: %+v", ev)
		}
	}

	df := runs[svcDropField]
	if df.Outcome != drill.OutcomeFailed || df.Progress.Verdicts.FallbackCorrect.Result != drill.Fail ||
		!strings.Contains(df.Progress.Verdicts.FallbackCorrect.Summary, "/source") {
		t.Errorf("dropped field: %s / %+v", df.Outcome, df.Progress.Verdicts.FallbackCorrect)
	}
	if ff := df.Progress.Degraded[0].FirstFailure; ff == nil || ff.Body != `{"items":[]}` {
		t.Errorf("dropped field: first failing body %+v", ff)
	}
	if df.Progress.Verdicts.TakesEffect.Result != drill.Pass || df.Progress.Verdicts.Fast.Result != drill.Pass {
		t.Errorf("dropped field: other checks %+v", df.Progress.Verdicts)
	}

	slow := runs[svcSlow]
	if slow.Outcome != drill.OutcomeFailed || slow.Progress.Verdicts.Fast.Result != drill.Fail ||
		slow.Progress.Verdicts.FallbackCorrect.Result != drill.Pass {
		t.Errorf("slow degraded path: %s %+v", slow.Outcome, slow.Progress.Verdicts)
	}
	if p99 := slow.Progress.Degraded[0].P99MS; p99 < 50 {
		t.Errorf("slow degraded path: probe p99 %.1f ms", p99)
	}

	cached := runs[svcCached]
	te := cached.Progress.Verdicts.TakesEffect
	if cached.Outcome != drill.OutcomeFailed || te.Result != drill.Fail ||
		!strings.Contains(te.Summary, "shop-cached-0") || !strings.Contains(te.Summary, "shop-cached-1") {
		t.Errorf("cached switch: %s %+v", cached.Outcome, te)
	}

	for _, k := range kinds {
		app := "shop-" + k
		sw := mustStatus(t, call(t, c, "GET", "/api/v1/apps/"+app+"/switches/recommend", adminToken, ""), 200)
		if sw.str("switch", "state") != "off" || sw.num("switch", "version") != 1 {
			t.Errorf("%s: the run touched the stored switch: %s", app, sw.Raw)
		}
		if v := e.etcdValue("/switchyard/v1/default/overrides/" + app + "/recommend"); v != "" {
			t.Errorf("%s: override left behind: %s", app, v)
		}
		evs, _, err := c.Service.ListAudit(context.Background(), audit.Filter{Target: "drill/" + app + "/reco"})
		if err != nil {
			t.Fatal(err)
		}
		seen := map[audit.Action]bool{}
		for _, ev := range evs {
			if ev.ActorKind == audit.ActorDrill {
				seen[ev.Action] = true
				if ev.Cause != "drill/"+app+"/reco#1" {
					t.Errorf("%s: event %s cause %q", app, ev.Action, ev.Cause)
				}
			}
		}
		if !seen[audit.DrillStart] || !seen[audit.DrillFinish] {
			t.Errorf("%s: drill events %v", app, seen)
		}
		var findings, failedNotes, passedNotes int64
		c.DB.Table("findings").Where("kind = ? AND target = ? AND resolved_at IS NULL", "drill_failed", "drill/"+app+"/reco").Count(&findings)
		c.DB.Table("notifications").Where("kind = ? AND app = ?", "drill.failed", app).Count(&failedNotes)
		c.DB.Table("notifications").Where("kind = ? AND app = ?", "drill.passed", app).Count(&passedNotes)
		want := int64(1)
		if k == svcCorrect {
			want = 0
		}
		if findings != want || failedNotes != want || passedNotes != 1-want {
			t.Errorf("%s: %d open drill_failed findings, %d drill.failed and %d drill.passed notifications", app, findings, failedNotes, passedNotes)
		}
	}
	md := mustStatus(t, call(t, c, "GET", "/api/v1/apps/shop-dropfield/drills/reco/runs/1/report.md", adminToken, ""), 200)
	if !strings.Contains(md.Raw, "| fallback correct | fail |") || !strings.Contains(md.Raw, `{"items":[]}`) {
		t.Errorf("markdown report:\n%s", md.Raw)
	}
	if cd := md.Header.Get("Content-Disposition"); !strings.Contains(cd, "shop-dropfield-reco-1.md") {
		t.Errorf("markdown report disposition %q", cd)
	}
	js := mustStatus(t, call(t, c, "GET", "/api/v1/apps/shop-correct/drills/reco/runs/1/report.json", adminToken, ""), 200)
	if js.str("outcome") != drill.OutcomePassed {
		t.Errorf("json report: %s", js.Raw)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

// TestDrillLeaderKilled: the console running a drill (a child process) is
// SIGKILLed while the override is on for five SDK clients. Every client
// answers the switch off again within the override lease's TTL + 1 s —
// with no console left (etcd expires the lease), or sooner when another
// console takes over and removes it — and the new leader records the run
// as interrupted; the override key is gone and the stored switch was never
// touched.
func TestDrillLeaderKilled(t *testing.T) {
	t.Run("survivor takes over", func(t *testing.T) { drillLeaderKilled(t, true) })
	t.Run("no console left", func(t *testing.T) { drillLeaderKilled(t, false) })
}

func drillLeaderKilled(t *testing.T, survivorRunning bool) {
	e := newEnv(t)
	dt := startDrillTarget(t, e, "shop-kill", svcCorrect, 5)
	boot := e.start(func(c *console.Config) { c.ConsoleID = "boot" })
	seedDrill(t, boot, "shop-kill", dt.urls[0], "")
	mustStatus(t, call(t, boot, "PATCH", "/api/v1/apps/shop-kill/drills/reco", adminToken, `{"duration":"10m","reason":"long enough to be killed in"}`), 200)
	stop(boot)

	dying := e.startProcess("dying")
	servertest.Eventually(t, 15*time.Second, "the process leads", func() bool { return electionLeader(e) == "dying" })
	waitURL := func(p *process) func() bool {
		return func() bool {
			r, err := http.Get(p.url + "/healthz")
			if err == nil {
				r.Body.Close()
			}
			return err == nil
		}
	}
	servertest.Eventually(t, 10*time.Second, "the process serves", waitURL(dying))
	runReq, _ := http.NewRequest("POST", dying.url+"/api/v1/apps/shop-kill/drills/reco/runs", strings.NewReader(`{"reason":"kill drill"}`))
	runReq.Header.Set("Content-Type", "application/json")
	runReq.Header.Set("Authorization", "Bearer "+adminToken)
	res, err := http.DefaultClient.Do(runReq)
	if err != nil || res.StatusCode != 202 {
		t.Fatalf("run now on the leader: %v %v", res, err)
	}
	res.Body.Close()
	var survivor *console.Console
	if survivorRunning {
		survivor = e.start(func(c *console.Config) { c.ConsoleID = "survivor" })
	}

	ctx := context.Background()
	answering := func(on bool) bool {
		for _, c := range dt.clients {
			if c.Switch("recommend").On(ctx) != on {
				return false
			}
		}
		return true
	}
	servertest.Eventually(t, 20*time.Second, "every client answers the drilled switch on", func() bool { return answering(true) })
	var ttl time.Duration
	servertest.Eventually(t, 10*time.Second, "the run is active", func() bool {
		var r drill.Run
		if err := e.db(t).Where("app = ?", "shop-kill").Take(&r).Error; err != nil {
			return false
		}
		var p drill.Progress
		_ = json.Unmarshal([]byte(r.State), &p)
		ttl = time.Duration(p.LeaseTTLSeconds) * time.Second
		return r.Phase == drill.PhaseActive
	})
	if ttl <= 0 || ttl > 10*time.Second {
		t.Fatalf("lease TTL %v", ttl)
	}

	died := dying.kill(t)
	servertest.Eventually(t, ttl+time.Second, "every client answers the switch off again", func() bool { return answering(false) })
	t.Logf("all %d clients answer off %v after the SIGKILL (lease TTL %v, bound %v, another console running: %v)", len(dt.clients), time.Since(died).Round(time.Millisecond), ttl, ttl+time.Second, survivorRunning)
	if !survivorRunning {
		survivor = e.start(func(c *console.Config) { c.ConsoleID = "survivor" })
	}

	v := waitRun(t, survivor, "shop-kill", 1, 20*time.Second)
	t.Logf("the new leader recorded %s %v after the SIGKILL: %s", v.Outcome, v.FinishedAt.Sub(died).Round(time.Millisecond), v.Summary)
	if v.Outcome != drill.OutcomeInterrupted {
		t.Fatalf("outcome %s: %s", v.Outcome, v.Summary)
	}
	if got := e.etcdValue("/switchyard/v1/default/overrides/shop-kill/recommend"); got != "" {
		t.Fatalf("override left behind: %s", got)
	}
	sw := mustStatus(t, call(t, survivor, "GET", "/api/v1/apps/shop-kill/switches/recommend", adminToken, ""), 200)
	if sw.str("switch", "state") != "off" || sw.num("switch", "version") != 1 {
		t.Fatalf("the run touched the stored switch: %s", sw.Raw)
	}
	var notes int64
	survivor.DB.Table("notifications").Where("kind = ? AND app = ?", "drill.interrupted", "shop-kill").Count(&notes)
	if notes != 1 {
		t.Fatalf("%d drill.interrupted notifications", notes)
	}
}

// db opens the env's database directly (closed when the test ends).
func (e *env) db(t testing.TB) *gorm.DB {
	t.Helper()
	if e.gdb == nil {
		e.gdb = servertest.OpenDB(t, e.pgURL, "")
	}
	return e.gdb
}

// fakeClock is the console's clock in the schedule test: the test sets it.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (f *fakeClock) Now() time.Time  { f.mu.Lock(); defer f.mu.Unlock(); return f.t }
func (f *fakeClock) Set(t time.Time) { f.mu.Lock(); f.t = t; f.mu.Unlock() }

// TestDrillSchedule drives a drill's schedule (03:30 and 03:40 in
// Europe/Berlin, a 5 min starting deadline, a blackout all of 5 March) with
// an injected clock: a run starts at its cron time; cron times that come
// while a person's run is in progress are refused as overlapping, and
// recorded as one row that counts them; a cron time inside the blackout is
// refused and recorded; cron times that passed while no console ran are
// recorded as one missed run, not run late, and later ones add to it; a
// run found due within the starting deadline still starts; the preflight
// refuses while a person has a switch of the app on. Runs store the drill's
// version and spec hash, never the probe's header values, and still probe
// with them.
func TestDrillSchedule(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	at := func(day, hour, minute, sec int) time.Time {
		return time.Date(2030, 3, day, hour, minute, sec, 0, berlin)
	}
	clk := &fakeClock{t: at(4, 3, 20, 0)}
	e := newEnv(t)
	c := e.startWith([]console.Option{console.WithClock(clk.Now)}, steadyLeader)
	waitLeader(t, c)
	const app, secret = "shop-sched", "s3cret-drill-token"
	dt := startDrillTarget(t, e, app, svcCorrect, 2)
	// The probed endpoint refuses a probe whose token is not the drill's.
	guarded := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Drill-Token") != secret {
			http.Error(w, "bad token", http.StatusUnauthorized)
			return
		}
		res, err := http.Get(dt.urls[0])
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer res.Body.Close()
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.Copy(w, res.Body)
	}))
	t.Cleanup(guarded.Close)
	e.allowEgress(guarded.Listener.Addr().String())
	seedDrill(t, c, app, guarded.URL, `,"schedule":"30,40 3 * * *","timezone":"Europe/Berlin","starting_deadline":"5m",`+
		`"blackout":[{"cron":"0 0 5 3 *","duration":"24h"}]`)
	mustStatus(t, call(t, c, "PATCH", "/api/v1/apps/"+app+"/drills/reco", adminToken,
		`{"duration":"30m","reason":"longer than the schedule's gap"}`), 400)
	mustStatus(t, call(t, c, "PATCH", "/api/v1/apps/"+app+"/drills/reco", adminToken, `{"duration":"10m","probes":[{"url":"`+guarded.URL+
		`","headers":{"X-Drill-Token":"`+secret+`"},"required_fields":["/items","/source"],"requests":20}],"reason":"hold while the test looks"}`), 200)
	mustStatus(t, call(t, c, "POST", "/api/v1/apps/"+app+"/switches", adminToken, `{"name":"banner","level":"L3","reason":"seed"}`), 201)
	waitInstances(t, c, app, 2)
	d := mustStatus(t, call(t, c, "GET", "/api/v1/apps/"+app+"/drills/reco", adminToken, ""), 200)
	if d.str("drill", "next_run") != "2030-03-04T02:30:00Z" {
		t.Fatalf("next run %q, want 03:30 Berlin (02:30 UTC)", d.str("drill", "next_run"))
	}
	runs := func() []drill.Run {
		var out []drill.Run
		if err := c.DB.Where("app = ?", app).Order("number").Find(&out).Error; err != nil {
			t.Fatal(err)
		}
		return out
	}
	waitRuns := func(n int, what string) []drill.Run {
		t.Helper()
		var rs []drill.Run
		servertest.Eventually(t, 20*time.Second, what, func() bool { rs = runs(); return len(rs) == n && (n == 0 || rs[n-1].Phase != drill.PhasePending) })
		return rs
	}
	ends := func(n int) drill.Run {
		t.Helper()
		// The recovery watch is timed by the console's clock too: a minute
		// later it has seen the fleet's counters quiet, or gives up.
		clk.Set(clk.Now().Add(time.Minute))
		servertest.Eventually(t, 30*time.Second, fmt.Sprintf("run #%d ends", n), func() bool { return runs()[n-1].FinishedAt != nil })
		return runs()[n-1]
	}
	abort := func(n int) {
		t.Helper()
		mustStatus(t, call(t, c, "POST", fmt.Sprintf("/api/v1/apps/%s/drills/reco/runs/%d/abort", app, n), adminToken, `{"reason":"enough"}`), 200)
		servertest.Eventually(t, 10*time.Second, fmt.Sprintf("run #%d reverts", n), func() bool { return runs()[n-1].Phase != drill.PhaseActive })
		if r := ends(n); r.Outcome != drill.OutcomeAborted {
			t.Fatalf("run #%d: %s %s", n, r.Outcome, r.Summary)
		}
	}
	logRun := func(r drill.Run) {
		t.Logf("run #%d via %s for %v (×%d): phase %s, outcome %q: %s", r.Number, r.StartedVia, r.ScheduledFor.In(berlin).Format("Jan 2 15:04 MST"), r.Count, r.Phase, r.Outcome, r.Summary)
	}

	// A person's run at 03:28, with the probe's token; it holds the switch
	// for 10 min, over both cron times of the day.
	clk.Set(at(4, 3, 28, 0))
	mustStatus(t, call(t, c, "POST", "/api/v1/apps/"+app+"/drills/reco/runs", adminToken, `{"reason":"by hand"}`), 202)
	servertest.Eventually(t, 20*time.Second, "run #1 is active", func() bool { rs := runs(); return len(rs) == 1 && rs[0].Phase == drill.PhaseActive })
	var dv struct{ Version int64 }
	c.DB.Table("drills").Where("app = ?", app).Select("version").Scan(&dv)
	if r := runs()[0]; strings.Contains(r.Spec, secret) || len(r.SpecSHA256) != 64 || r.DrillVersion != dv.Version || !strings.Contains(r.Spec, "X-Drill-Token") {
		t.Fatalf("run #1 stores spec %s (sha256 %q, drill version %d of %d)", r.Spec, r.SpecSHA256, r.DrillVersion, dv.Version)
	}
	clk.Set(at(4, 3, 30, 1))
	rs := waitRuns(2, "the 03:30 run is refused")
	if rs[1].Outcome != drill.OutcomeRefused || !strings.Contains(rs[1].Summary, "overlaps run #1") || rs[1].Count != 1 {
		t.Fatalf("overlapping run: %+v", rs[1])
	}
	// At 03:40 run #1 is past its duration but not reverted yet: refused
	// again, counted on the same row.
	clk.Set(at(4, 3, 40, 1))
	servertest.Eventually(t, 20*time.Second, "the 03:40 refusal is counted", func() bool { rs = runs(); return len(rs) == 2 && rs[1].Count == 2 })
	logRun(rs[1])
	if !strings.Contains(rs[1].Summary, "refused 2 scheduled runs") || !rs[1].LastScheduledFor.Equal(at(4, 3, 40, 0)) {
		t.Fatalf("coalesced refusals: %+v", rs[1])
	}
	// Its probes carried the token (the guarded endpoint answered them):
	// the clock's jumps fail its timing verdicts, not its fallback.
	if r := ends(1); !strings.Contains(r.Summary, "fallback correct pass") {
		t.Fatalf("run #1 (probing with the drill's token): %s %s", r.Outcome, r.Summary)
	}

	clk.Set(at(5, 3, 30, 1))
	rs = waitRuns(3, "the run inside the blackout is recorded")
	servertest.Eventually(t, 20*time.Second, "run #3 is decided", func() bool { rs = runs(); return rs[2].FinishedAt != nil })
	logRun(rs[2])
	if rs[2].Outcome != drill.OutcomeRefused || !strings.Contains(rs[2].Summary, "blackout") {
		t.Fatalf("blackout run: %+v", rs[2])
	}

	// Console "down" from 5 March 03:31 to 7 March 03:50: five cron times
	// pass, the newest 10 min before now, beyond the 5 min deadline.
	clk.Set(at(7, 3, 50, 0))
	rs = waitRuns(4, "the missed runs are recorded")
	logRun(rs[3])
	if rs[3].Outcome != drill.OutcomeMissed || !strings.Contains(rs[3].Summary, "missed 5 scheduled run(s)") || rs[3].Count != 5 {
		t.Fatalf("missed runs: %+v", rs[3])
	}
	// Down again until 8 March 03:50: two more, on the same row.
	clk.Set(at(8, 3, 50, 0))
	servertest.Eventually(t, 20*time.Second, "the next missed runs are counted", func() bool { rs = runs(); return len(rs) == 4 && rs[3].Count == 7 })
	logRun(rs[3])
	if !strings.Contains(rs[3].Summary, "missed 7 scheduled run(s), from 2030-03-05 02:40:00 UTC to 2030-03-08 02:40:00 UTC") {
		t.Fatalf("coalesced missed runs: %+v", rs[3])
	}
	// Found 3 min late: within the starting deadline, it starts.
	clk.Set(at(9, 3, 33, 0))
	rs = waitRuns(5, "the late run starts")
	servertest.Eventually(t, 20*time.Second, "run #5 is active", func() bool { return runs()[4].Phase == drill.PhaseActive })
	logRun(runs()[4])
	abort(5)

	mustStatus(t, call(t, c, "POST", "/api/v1/apps/"+app+"/switches/banner/on", adminToken, `{"reason":"incident: banner off"}`), 200)
	clk.Set(at(10, 3, 30, 1))
	// 9 March 03:40 passed unrun (missed, #6); 10 March 03:30 is due (#7).
	servertest.Eventually(t, 20*time.Second, "run #7 is decided", func() bool { rs = runs(); return len(rs) == 7 && rs[6].FinishedAt != nil })
	logRun(rs[5])
	logRun(rs[6])
	if rs[5].Outcome != drill.OutcomeMissed || rs[6].Outcome != drill.OutcomeRefused ||
		!strings.Contains(rs[6].Summary, "switch/"+app+"/banner is on by token") {
		t.Fatalf("preflight with a person's switch on: %+v", rs[6])
	}
	if v := e.etcdValue("/switchyard/v1/default/overrides/" + app + "/recommend"); v != "" {
		t.Fatalf("override left behind: %s", v)
	}
}

// TestDrillBadInput sends drill requests that must each be refused with a
// problem document naming the field, and checks that no drill, run, audit
// event or etcd override changed.
func TestDrillBadInput(t *testing.T) {
	e := newEnv(t)
	c := e.start()
	waitLeader(t, c)
	const app = "shop-bad"
	seedDrill(t, c, app, "http://svc.invalid/recommendations", "")
	viewerTok := mustStatus(t, call(t, c, "POST", "/api/v1/tokens", adminToken, `{"name":"viewer","role":"viewer","reason":"read only"}`), 201).str("token")
	base := "/api/v1/apps/" + app + "/drills"
	probe := `"probes":[{"url":"http://svc/recommendations"}]`
	ok := `"name":"d2","switch":"recommend","target":{"percent":5},"duration":"1m",` + probe + `,"reason":"r"`
	with := func(extra string) string { return `{` + ok + `,` + extra + `}` }
	mk := func(fields string) string { return `{"name":"d2","reason":"r",` + fields + `}` }
	cases := []struct {
		name, method, path, token, body string
		status                          int
		field                           string
	}{
		{"cron that does not parse", "POST", base, adminToken, with(`"schedule":"61 * * * *"`), 400, "schedule"},
		{"cron with six fields", "POST", base, adminToken, with(`"schedule":"0 0 3 * * *"`), 400, "schedule"},
		{"cron with its own zone", "POST", base, adminToken, with(`"schedule":"CRON_TZ=UTC 0 3 * * *"`), 400, "schedule"},
		{"unknown time zone", "POST", base, adminToken, with(`"timezone":"Mars/Olympus"`), 400, "timezone"},
		{"duration 0", "POST", base, adminToken, mk(`"switch":"recommend","target":{"percent":5},"duration":"0s",` + probe), 400, "duration"},
		{"negative duration", "POST", base, adminToken, mk(`"switch":"recommend","target":{"percent":5},"duration":"-1m",` + probe), 400, "duration"},
		{"duration over 1h", "POST", base, adminToken, mk(`"switch":"recommend","target":{"percent":5},"duration":"61m",` + probe), 400, "duration"},
		{"duration not a duration", "POST", base, adminToken, mk(`"switch":"recommend","target":{"percent":5},"duration":"soon",` + probe), 400, "duration"},
		{"missing duration", "POST", base, adminToken, mk(`"switch":"recommend","target":{"percent":5},` + probe), 400, "duration"},
		{"probe URL not http", "POST", base, adminToken, mk(`"switch":"recommend","target":{"percent":5},"duration":"1m","probes":[{"url":"ftp://svc/x"}]`), 400, "probes[0].url"},
		{"probe URL without host", "POST", base, adminToken, mk(`"switch":"recommend","target":{"percent":5},"duration":"1m","probes":[{"url":"http:///x"}]`), 400, "probes[0].url"},
		{"JSON pointer that does not parse", "POST", base, adminToken, mk(`"switch":"recommend","target":{"percent":5},"duration":"1m","probes":[{"url":"http://svc/x","required_fields":["/items","items"]}]`), 400, "probes[0].required_fields[1]"},
		{"JSON pointer with a bad escape", "POST", base, adminToken, mk(`"switch":"recommend","target":{"percent":5},"duration":"1m","probes":[{"url":"http://svc/x","required_fields":["/a~2b"]}]`), 400, "probes[0].required_fields[0]"},
		{"target over 100", "POST", base, adminToken, mk(`"switch":"recommend","target":{"percent":101},"duration":"1m",` + probe), 400, "target.percent"},
		{"target below 0", "POST", base, adminToken, mk(`"switch":"recommend","target":{"percent":-1},"duration":"1m",` + probe), 400, "target.percent"},
		{"target 0", "POST", base, adminToken, mk(`"switch":"recommend","target":{"percent":0},"duration":"1m",` + probe), 400, "target.percent"},
		{"no target", "POST", base, adminToken, mk(`"switch":"recommend","target":{},"duration":"1m",` + probe), 400, "target"},
		{"bad selector", "POST", base, adminToken, mk(`"switch":"recommend","target":{"selector":"canary=,,"},"duration":"1m",` + probe), 400, "target.selector"},
		{"no probes", "POST", base, adminToken, mk(`"switch":"recommend","target":{"percent":5},"duration":"1m"`), 400, "probes"},
		{"bad expect_status", "POST", base, adminToken, mk(`"switch":"recommend","target":{"percent":5},"duration":"1m","probes":[{"url":"http://svc/x","expect_status":700}]`), 400, "probes[0].expect_status"},
		{"bad max_p99", "POST", base, adminToken, mk(`"switch":"recommend","target":{"percent":5},"duration":"1m","probes":[{"url":"http://svc/x","max_p99":"fast"}]`), 400, "probes[0].max_p99"},
		{"requests 0", "POST", base, adminToken, mk(`"switch":"recommend","target":{"percent":5},"duration":"1m","probes":[{"url":"http://svc/x","requests":0}]`), 400, "probes[0].requests"},
		{"expect_status 0", "POST", base, adminToken, mk(`"switch":"recommend","target":{"percent":5},"duration":"1m","probes":[{"url":"http://svc/x","expect_status":0}]`), 400, "probes[0].expect_status"},
		{"too many requests", "POST", base, adminToken, mk(`"switch":"recommend","target":{"percent":5},"duration":"1m","probes":[{"url":"http://svc/x","requests":5000}]`), 400, "probes[0].requests"},
		{"unknown switch", "POST", base, adminToken, mk(`"switch":"nope","target":{"percent":5},"duration":"1m",` + probe), 400, "switch"},
		{"bad abort source", "POST", base, adminToken, with(`"abort":{"conditions":[{"source":"graphite","query":"x","op":">","threshold":1}]}`), 400, "abort.conditions[0].source"},
		{"prometheus not configured", "POST", base, adminToken, with(`"abort":{"conditions":[{"source":"prometheus","query":"up","op":">","threshold":1}]}`), 400, "abort.conditions[0].source"},
		{"bad fleet query", "POST", base, adminToken, with(`"abort":{"conditions":[{"source":"fleet","query":"error_rate{}","op":">","threshold":1}]}`), 400, "abort.conditions[0].query"},
		{"bad abort op", "POST", base, adminToken, with(`"abort":{"conditions":[{"source":"fleet","query":"instances{}","op":"!=","threshold":1}]}`), 400, "abort.conditions[0].op"},
		{"bad probe failure rate", "POST", base, adminToken, with(`"abort":{"probe_failure_rate":1.5}`), 400, "abort.probe_failure_rate"},
		{"blackout end before start", "POST", base, adminToken, with(`"blackout":[{"start":"2030-01-02T00:00:00Z","end":"2030-01-01T00:00:00Z"}]`), 400, "blackout[0].end"},
		{"blackout bad cron", "POST", base, adminToken, with(`"blackout":[{"cron":"every friday","duration":"8h"}]`), 400, "blackout[0].cron"},
		{"blackout of both kinds", "POST", base, adminToken, with(`"blackout":[{"start":"2030-01-01T00:00:00Z","end":"2030-01-02T00:00:00Z","cron":"0 9 * * *","duration":"1h"}]`), 400, "blackout[0]"},
		{"bad starting deadline", "POST", base, adminToken, with(`"starting_deadline":"2d"`), 400, "starting_deadline"},
		{"starting deadline under two steps", "POST", base, adminToken, with(`"starting_deadline":"1s"`), 400, "starting_deadline"},
		{"schedule more often than a minute", "POST", base, adminToken, with(`"schedule":"@every 30s"`), 400, "schedule"},
		{"schedule closer than the duration", "POST", base, adminToken, with(`"schedule":"*/5 * * * *","duration":"10m"`), 400, "schedule"},
		{"probe round longer than 2m", "POST", base, adminToken, mk(`"switch":"recommend","target":{"percent":5},"duration":"1m","probes":[{"url":"http://svc/r","requests":20,"timeout":"10s"}]`), 400, "probes[0].requests"},
		{"unknown field", "POST", base, adminToken, with(`"colour":"red"`), 400, "colour"},
		{"bad drill name", "POST", base, adminToken, `{"name":"Bad Name",` + strings.TrimPrefix(ok, `"name":"d2",`) + `}`, 400, "name"},
		{"missing reason", "POST", base, adminToken, `{` + strings.TrimSuffix(ok, `,"reason":"r"`) + `}`, 400, "reason"},
		{"duplicate drill", "POST", base, adminToken, `{"name":"reco",` + strings.TrimPrefix(ok, `"name":"d2",`) + `}`, 409, "name"},
		{"viewer creates", "POST", base, viewerTok, with(`"enabled":true`), 403, ""},
		{"patch bad cron", "PATCH", base + "/reco", adminToken, `{"schedule":"@sometimes","reason":"r"}`, 400, "schedule"},
		{"patch the name", "PATCH", base + "/reco", adminToken, `{"name":"other","reason":"r"}`, 400, "name"},
		{"patch stale version", "PATCH", base + "/reco", adminToken, `{"duration":"2m","version":9,"reason":"r"}`, 409, "version"},
		{"patch without reason", "PATCH", base + "/reco", adminToken, `{"duration":"2m"}`, 400, "reason"},
		{"run without reason", "POST", base + "/reco/runs", adminToken, `{}`, 400, "reason"},
		{"run of an unknown drill", "POST", base + "/nope/runs", adminToken, `{"reason":"r"}`, 404, ""},
		{"bad run number", "GET", base + "/reco/runs/first", adminToken, "", 400, "run"},
		{"abort an unknown run", "POST", base + "/reco/runs/9/abort", adminToken, `{"reason":"r"}`, 404, ""},
		{"viewer runs", "POST", base + "/reco/runs", viewerTok, `{"reason":"r"}`, 403, ""},
		{"delete stale version", "DELETE", base + "/reco?reason=r&version=9", adminToken, "", 409, "version"},
	}
	count := func(table string) int64 {
		var n int64
		if err := c.DB.Table(table).Count(&n).Error; err != nil {
			t.Fatal(err)
		}
		return n
	}
	type state struct{ drills, runs, audit, overrides int64 }
	snap := func() state {
		resp, err := e.cli.Get(context.Background(), "/switchyard/v1/default/overrides/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		return state{count("drills"), count("drill_runs"), count("audit_events"), resp.Count}
	}
	before := snap()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mustProblem(t, call(t, c, tc.method, tc.path, tc.token, tc.body), tc.status, tc.field)
		})
	}
	// Every bad field of one request is listed.
	r := call(t, c, "POST", base, adminToken, mk(`"switch":"recommend","schedule":"nope","timezone":"Nowhere","target":{"percent":300},"duration":"0s","probes":[{"url":"gopher://x","required_fields":["x"]}]`))
	if r.Status != 400 || len(r.Body["errors"].([]any)) != 6 {
		t.Fatalf("all errors: %s", r.Raw)
	}
	if after := snap(); after != before {
		t.Fatalf("rejected requests changed state:\nbefore %+v\nafter  %+v", before, after)
	}
}

// TestDrillAbortCondition: a drill whose abort condition is the app's
// error rate in a real Prometheus. The rate crossing the threshold
// mid-run reverts the override at once (the run aborted, the finding
// opened); Prometheus going down mid-run aborts the next run too: a drill
// does not go on blind.
func TestDrillAbortCondition(t *testing.T) {
	prom := promtest.Start(t)
	prom.Exporter.Set("shop_error_rate", 0.01)
	prom.Sync(t)
	e := newEnv(t)
	c := e.start(steadyLeader, func(cfg *console.Config) { cfg.PrometheusURL = prom.URL })
	waitLeader(t, c)
	const app = "shop-abort"
	dt := startDrillTarget(t, e, app, svcCorrect, 2)
	seedDrill(t, c, app, dt.urls[0], `,"abort":{"conditions":[{"source":"prometheus","query":"max(shop_error_rate)","op":">","threshold":0.05}]}`)
	mustStatus(t, call(t, c, "PATCH", "/api/v1/apps/"+app+"/drills/reco", adminToken, `{"duration":"10m","reason":"held until aborted"}`), 200)
	waitInstances(t, c, app, 2)
	ctx := context.Background()
	allOff := func() bool {
		for _, cl := range dt.clients {
			if cl.Switch("recommend").On(ctx) {
				return false
			}
		}
		return true
	}
	active := func(n int) {
		t.Helper()
		servertest.Eventually(t, 20*time.Second, fmt.Sprintf("run #%d checked takes effect", n), func() bool {
			v := runView(t, c, app, n)
			return v.Phase == drill.PhaseActive && v.Progress.EffectDoneAt != nil
		})
	}

	mustStatus(t, call(t, c, "POST", "/api/v1/apps/"+app+"/drills/reco/runs", adminToken, `{"reason":"abort on errors"}`), 202)
	active(1)
	prom.Exporter.Set("shop_error_rate", 0.2)
	prom.Sync(t)
	crossed := time.Now()
	servertest.Eventually(t, 10*time.Second, "the override is removed", func() bool {
		return e.etcdValue("/switchyard/v1/default/overrides/"+app+"/recommend") == "" && allOff()
	})
	t.Logf("error rate above the threshold in Prometheus → override removed and both clients off in %v", time.Since(crossed).Round(time.Millisecond))
	v := waitRun(t, c, app, 1, 40*time.Second)
	logVerdicts(t, v)
	if v.Outcome != drill.OutcomeAborted || !strings.Contains(v.Summary, "max(shop_error_rate) > 0.05: the value is 0.2") {
		t.Fatalf("run #1: %s %s", v.Outcome, v.Summary)
	}
	if v.Progress.Verdicts.Recovers.Result != drill.Pass {
		t.Errorf("run #1 did not check recovery: %+v", v.Progress.Verdicts.Recovers)
	}
	var findings int64
	c.DB.Table("findings").Where("kind = ? AND target = ? AND resolved_at IS NULL", "drill_failed", "drill/"+app+"/reco").Count(&findings)
	if findings != 1 {
		t.Errorf("%d open drill_failed findings", findings)
	}

	prom.Exporter.Set("shop_error_rate", 0.01)
	prom.Sync(t)
	mustStatus(t, call(t, c, "POST", "/api/v1/apps/"+app+"/drills/reco/runs", adminToken, `{"reason":"abort when blind"}`), 202)
	active(2)
	prom.Stop()
	stopped := time.Now()
	servertest.Eventually(t, 10*time.Second, "the override is removed", func() bool {
		return e.etcdValue("/switchyard/v1/default/overrides/"+app+"/recommend") == "" && allOff()
	})
	t.Logf("Prometheus down → override removed and both clients off in %v", time.Since(stopped).Round(time.Millisecond))
	v = waitRun(t, c, app, 2, 40*time.Second)
	if v.Outcome != drill.OutcomeAborted || !strings.Contains(v.Summary, "could not be evaluated") {
		t.Fatalf("run #2: %s %s", v.Outcome, v.Summary)
	}
	t.Logf("run #2: %s", v.Summary)
}

// TestDrillAbortWhileEndpointHangs: the drill's degraded endpoint never
// answers (its probe rounds allow 4 × 30 s), yet a person's abort takes
// effect within 1 s, and the override key is gone from the real embedded
// etcd within 1 s after that: the rounds run off the job's step, and the
// revert cuts them short.
func TestDrillAbortWhileEndpointHangs(t *testing.T) {
	e := newEnv(t)
	c := e.start(steadyLeader)
	waitLeader(t, c)
	const app = "shop-hang"
	dt := startDrillTarget(t, e, app, svcHang, 2)
	seedDrill(t, c, app, dt.urls[0], "")
	mustStatus(t, call(t, c, "PATCH", "/api/v1/apps/"+app+"/drills/reco", adminToken, `{"duration":"10m","probes":[{"url":"`+dt.urls[0]+
		`","required_fields":["/items"],"requests":4,"timeout":"30s"}],"reason":"held until aborted"}`), 200)
	waitInstances(t, c, app, 2)
	mustStatus(t, call(t, c, "POST", "/api/v1/apps/"+app+"/drills/reco/runs", adminToken, `{"reason":"hang drill"}`), 202)
	key := "/switchyard/v1/default/overrides/" + app + "/recommend"
	servertest.Eventually(t, 30*time.Second, "the degraded probe round hangs on the endpoint", func() bool {
		r := runView(t, c, app, 1)
		return r.Phase == drill.PhaseActive && e.etcdValue(key) != "" && dt.hanging.Load() > 0 && r.Progress.EffectDoneAt == nil && r.Progress.AppliedAt != nil &&
			time.Since(*r.Progress.AppliedAt) > 2*time.Second // well into the hang
	})
	asked := time.Now()
	mustStatus(t, call(t, c, "POST", "/api/v1/apps/"+app+"/drills/reco/runs/1/abort", adminToken, `{"reason":"the endpoint hangs"}`), 200)
	servertest.Eventually(t, time.Second, "the abort takes effect within 1 s", func() bool { return runView(t, c, app, 1).Phase != drill.PhaseActive })
	tookEffect := time.Now()
	servertest.Eventually(t, time.Second, "the override is gone within 1 s after that", func() bool { return e.etcdValue(key) == "" })
	gone := time.Now()
	r := runView(t, c, app, 1)
	if !strings.Contains(r.Progress.AbortReason, "the endpoint hangs") || r.Progress.RevertedAt == nil {
		t.Fatalf("run: phase %s, abort %q", r.Phase, r.Progress.AbortReason)
	}
	t.Logf("abort took effect %v after it was asked, override gone %v after that, with %d probe requests hanging",
		tookEffect.Sub(asked).Round(time.Millisecond), gone.Sub(tookEffect).Round(time.Millisecond), dt.hanging.Load())

	// Nobody aborts the next run: its override ends with its duration,
	// within 1 s, the hanging round cut short.
	servertest.Eventually(t, 60*time.Second, "run #1 ends", func() bool { return runView(t, c, app, 1).FinishedAt != nil })
	mustStatus(t, call(t, c, "PATCH", "/api/v1/apps/"+app+"/drills/reco", adminToken, `{"duration":"3s","reason":"short"}`), 200)
	mustStatus(t, call(t, c, "POST", "/api/v1/apps/"+app+"/drills/reco/runs", adminToken, `{"reason":"hang drill, to the end"}`), 202)
	var applied time.Time
	servertest.Eventually(t, 30*time.Second, "run #2 applies its override", func() bool {
		r := runView(t, c, app, 2)
		if r.Progress.AppliedAt != nil {
			applied = *r.Progress.AppliedAt
		}
		return r.Progress.AppliedAt != nil && e.etcdValue(key) != ""
	})
	servertest.Eventually(t, time.Until(applied.Add(4*time.Second)), "the override is gone by its duration + 1 s", func() bool { return e.etcdValue(key) == "" })
	t.Logf("run #2's override (duration 3s) was gone %v after it was applied", time.Since(applied).Round(time.Millisecond))
}

// TestDrillEndsOnPersonChange: a person turning the drilled switch on
// mid-run ends the drill inside their own change (the run's abort request
// names them and what they did), and the override, which would hide their
// change, is gone soon after.
func TestDrillEndsOnPersonChange(t *testing.T) {
	e := newEnv(t)
	c := e.start(steadyLeader)
	waitLeader(t, c)
	const app = "shop-person"
	dt := startDrillTarget(t, e, app, svcCorrect, 1)
	seedDrill(t, c, app, dt.urls[0], "")
	mustStatus(t, call(t, c, "PATCH", "/api/v1/apps/"+app+"/drills/reco", adminToken, `{"duration":"10m","reason":"held until a person acts"}`), 200)
	waitInstances(t, c, app, 1)
	mustStatus(t, call(t, c, "POST", "/api/v1/apps/"+app+"/drills/reco/runs", adminToken, `{"reason":"person drill"}`), 202)
	key := "/switchyard/v1/default/overrides/" + app + "/recommend"
	servertest.Eventually(t, 30*time.Second, "the run is active with its override", func() bool {
		return runView(t, c, app, 1).Phase == drill.PhaseActive && e.etcdValue(key) != ""
	})
	mustStatus(t, call(t, c, "POST", "/api/v1/apps/"+app+"/switches/recommend/on", adminToken, `{"reason":"incident: degrade for real"}`), 200)
	servertest.Eventually(t, 10*time.Second, "the override is gone", func() bool { return e.etcdValue(key) == "" })
	v := waitRun(t, c, app, 1, 40*time.Second)
	// The person's hook records the abort inside their change; a job step
	// that read the run just before that commit sees the switch's new
	// version itself. Either way the run is aborted naming the person.
	byHook := strings.Contains(v.Progress.AbortReason, "changed the switch (switch.on): a person's change ends the drill")
	byStep := strings.Contains(v.Progress.AbortReason, "the switch changed during the drill (version 1 → 2, by token:bootstrap#1)")
	if v.Outcome != drill.OutcomeAborted || !(byHook || byStep) {
		t.Fatalf("run: %s, abort %q", v.Outcome, v.Progress.AbortReason)
	}
}
