package webui_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/etcdtest"
	"github.com/switchyard-io/switchyard/sdk/wire"
	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/console"
	"github.com/switchyard-io/switchyard/server/fleet"
	"github.com/switchyard-io/switchyard/server/webui"
)

// putInstance writes instances/<app>/<id> as the SDK writes it: the
// instance with its applied revision and, from SDKs that send signals, a
// report.
func putInstance(t testing.TB, c *console.Console, in wire.Instance) {
	t.Helper()
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Etcd.Put(context.Background(), wire.InstanceKey(c.Config.Namespace, in.App, in.InstanceID), string(b)); err != nil {
		t.Fatal(err)
	}
}

// waitFleet waits until the console's fleet model satisfies cond.
func waitFleet(t testing.TB, c *console.Console, what string, cond func(*fleet.Model) bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !cond(c.Fleet) {
		if time.Now().After(deadline) {
			t.Fatalf("the fleet model did not show %s within 10 s", what)
		}
		<-tick.C
	}
}

// reported says whether the model has the report taken at at from
// instance app/id.
func reported(app, id string, at int64) func(*fleet.Model) bool {
	return func(m *fleet.Model) bool {
		in, ok := m.Instance(app, id)
		return ok && in.LastReport != nil && in.LastReport.Unix() == at
	}
}

// etcdRevision is etcd's current revision: what an instance that is up to
// date has applied.
func etcdRevision(t testing.TB, c *console.Console) int64 {
	t.Helper()
	res, err := c.Etcd.Get(context.Background(), wire.NamespacePrefix(c.Config.Namespace), clientv3WithCountOnly()...)
	if err != nil {
		t.Fatal(err)
	}
	return res.Header.Revision
}

// between returns the part of body from the first from to the next to.
func between(t testing.TB, body, from, to string) string {
	t.Helper()
	i := strings.Index(body, from)
	if i < 0 {
		t.Fatalf("no %q in the page\n%s", from, body)
	}
	rest := body[i:]
	if j := strings.Index(rest, to); j >= 0 {
		return rest[:j]
	}
	return rest
}

// TestFleetPages: the Overview, the Instances page, an instance's page and
// a switch page show what the SDK instances report through the fleet model
// — applied N/M (and "no instances" rather than a green 0/0), degraded
// answers per second with a sparkline of the last hour, the limit rules
// rejecting now first, each instance's signals and staleness, old SDKs
// without signals — and say so when etcd does not answer.
func TestFleetPages(t *testing.T) {
	var etcd *etcdtest.Server
	c := startConsoleWith(t, webui.Options{Clock: fastClock{}}, func(cfg *console.Config) {
		etcd = etcdtest.Start(t) // this test stops it
		cfg.EtcdEndpoints = []string{etcd.Endpoint}
	})
	ctx := context.Background()
	cl := newClient(t, c)
	cl.signIn("admin", bootstrapToken)
	must := func(_ any, _ server.Receipt, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(c.Service.CreateSwitch(ctx, admin, "checkout", server.SwitchInput{Name: "recommend", Level: wire.L1, Fallback: json.RawMessage(`{"items":[]}`), Reason: "seed"}))
	must(c.Service.TurnOn(ctx, admin, "checkout", "recommend", server.Toggle{Reason: "INC-7 recommender down"}))
	must(c.Service.CreateSwitch(ctx, admin, "search", server.SwitchInput{Name: "ads", Level: wire.L3, Reason: "seed"}))
	must(c.Service.TurnOn(ctx, admin, "search", "ads", server.Toggle{Reason: "INC-8 ad server down"}))
	for _, r := range []wire.LimitRule{
		{Resource: "GET /cart", Kind: wire.KindConcurrency, Max: 50},
		{Resource: "ledger", Kind: wire.KindBreaker, ErrorRate: 0.5, MinRequests: 20, Window: wire.Duration(10 * time.Second), OpenDuration: wire.Duration(5 * time.Second), HalfOpenProbes: 1},
		{Resource: "GET /search", Kind: wire.KindConcurrency, Max: 3, Mode: wire.ModeShadow},
		{Resource: "POST /orders", Kind: wire.KindTokenBucket, Rate: 200, Burst: 50},
	} {
		must(c.Service.CreateLimit(ctx, admin, "checkout", server.LimitInput{LimitRule: r, Reason: "seed"}))
	}
	waitPublished(t, c)
	rev := etcdRevision(t, c)

	// Before any instance: applied by 0/0 is "no instances", not green.
	_, body := cl.get("/ui/")
	row := between(t, body, `id="on-search-ads"`, "</tr>")
	if !strings.Contains(row, "no instances") || strings.Contains(row, `class="applied`) {
		t.Errorf("a switch no instance evaluates reads\n%s", row)
	}

	// Instances as SDKs write them: one reporting answers, one reporting
	// rules (a breaker open), one of an SDK too old to send signals that
	// has not applied the newest revision.
	now := time.Now().UTC().Truncate(time.Second)
	at := now.Unix()
	iv := wire.Duration(10 * time.Second)
	putInstance(t, c, wire.Instance{App: "checkout", InstanceID: "checkout-2", SDKVersion: "v1.0.0", AppliedRevision: rev, AppliedAt: now,
		StartedAt: now.Add(-5 * time.Second), ReportInterval: iv, Report: &wire.Report{At: at,
			Switches: map[string]wire.SwitchSignal{"recommend": {LastRead: at}},
			Limits:   map[string]wire.LimitSignal{"ledger": {Allowed: 40, Breaker: wire.BreakerOpen}}}})
	putInstance(t, c, wire.Instance{App: "checkout", InstanceID: "checkout-old", SDKVersion: "v0.8.0", AppliedRevision: 1, AppliedAt: now.Add(-time.Hour),
		StartedAt: now.Add(-2 * time.Hour), Stats: map[string]int64{"fallbacks_served": 3}})
	waitFleet(t, c, "checkout-2's report", reported("checkout", "checkout-2", at))
	waitFleet(t, c, "checkout-old", func(m *fleet.Model) bool { _, ok := m.Instance("checkout", "checkout-old"); return ok })
	// An hour's history: nothing degraded 40 minutes ago, 10/s now.
	c.Fleet.Sample(now.Add(-40 * time.Minute))
	putInstance(t, c, wire.Instance{App: "checkout", InstanceID: "checkout-1", SDKVersion: "v1.0.0", Labels: map[string]string{"zone": "a"}, AppliedRevision: rev, AppliedAt: now,
		StartedAt: now.Add(-5 * time.Second), ReportInterval: iv, Report: &wire.Report{At: at,
			Switches: map[string]wire.SwitchSignal{"recommend": {Degraded: 50, Fallbacks: 50, LastRead: at, Latency: []uint64{40, 10}}},
			Limits: map[string]wire.LimitSignal{
				"POST /orders": {Allowed: 100, Rejected: 25},
				"GET /cart":    {Allowed: 500},
				"GET /search":  {Allowed: 90, ShadowRejected: 10},
			}}})
	waitFleet(t, c, "checkout-1's report", reported("checkout", "checkout-1", at))
	c.Fleet.Sample(time.Now())

	t.Run("overview", func(t *testing.T) {
		_, body := cl.get("/ui/")
		row := between(t, body, `id="on-checkout-recommend"`, "</tr>")
		for _, want := range []string{
			`<span class="applied partial" title="revision`, "applied by 2/3",
			`<td data-label="Degraded answers/s">`, "10/s",
			`<svg class="spark" viewBox="0 0 120 24" width="120" height="24" role="img"`,
			// The history began 40 minutes ago: the line starts there.
			"<title>degraded answers/s since " + now.Add(-40*time.Minute).Format("15:04") + " UTC: min 0, max 10, now 10</title>",
		} {
			if !strings.Contains(row, want) {
				t.Errorf("the Overview's row of checkout/recommend lacks %s\n%s", want, row)
			}
		}
		if !regexp.MustCompile(`<path d="M[0-9.]+,[0-9.]+L[0-9.]+,[0-9.]+"`).MatchString(row) {
			t.Errorf("the sparkline has no line from 40 minutes ago to now\n%s", row)
		}
		row = between(t, body, `id="on-search-ads"`, "</tr>")
		if !strings.Contains(row, "no instances") || !strings.Contains(row, "no data yet") || strings.Contains(row, "<svg") || strings.Contains(row, `class="applied`) {
			t.Errorf("a switch no instance evaluates: want no instances and no data yet, no line\n%s", row)
		}

		limits := between(t, body, `id="limits-h"`, "</section>")
		var order []string
		for _, m := range regexp.MustCompile(`<code>([^<]+)</code></a>`).FindAllStringSubmatch(limits, -1) {
			order = append(order, m[1])
		}
		if got, want := strings.Join(order, ", "), "POST /orders, ledger, GET /search, GET /cart"; got != want {
			t.Errorf("limits in force are listed %s, want the rejecting ones first: %s", got, want)
		}
		for _, want := range []string{
			"3</strong> limit rules are on in enforce mode", "<strong>2</strong> reject requests now",
			"5/s rejected", "breaker open on 1 of 1 instance", "would reject 2/s (shadow)",
		} {
			if !strings.Contains(limits, want) {
				t.Errorf("limits in force lack %q\n%s", want, limits)
			}
		}
		if cart := between(t, limits, "<code>GET /cart</code>", "</tr>"); !strings.Contains(cart, `<td data-label="Rejecting now">none</td>`) {
			t.Errorf("GET /cart rejects nothing\n%s", cart)
		}
		if strings.Contains(body, "not reported") || strings.Contains(body, "etcd did not answer") {
			t.Error("with the fleet in sync the Overview says something is not reported or unknown")
		}
	})

	t.Run("instances", func(t *testing.T) {
		_, body := cl.get("/ui/instances")
		one := between(t, body, `id="inst-checkout-checkout-1"`, "</tr>")
		for _, want := range []string{
			`href="/ui/apps/checkout/instances/checkout-1"`, `<span class="tag">zone=a</span>`,
			`<td data-label="Degraded">10/s <small>on 1 switch</small></td>`, `<td data-label="Rejected">5/s</td>`,
			`<td data-label="Breakers open">0</td>`, `<td data-label="Last report" title="` + now.Format("2006-01-02 15:04:05") + ` UTC">`, `<span class="ok">current</span>`,
		} {
			if !strings.Contains(one, want) {
				t.Errorf("checkout-1's row lacks %s\n%s", want, one)
			}
		}
		if two := between(t, body, `id="inst-checkout-checkout-2"`, "</tr>"); !strings.Contains(two, `<td data-label="Breakers open"><span class="warn">1</span></td>`) || !strings.Contains(two, `<td data-label="Degraded">none</td>`) {
			t.Errorf("checkout-2's row: want one breaker open and nothing degraded\n%s", two)
		}
		old := between(t, body, `id="inst-checkout-checkout-old"`, "</tr>")
		if !strings.Contains(old, "no signals (SDK too old)") || !strings.Contains(old, `>stale</span>`) {
			t.Errorf("the old SDK's row: want no signals and stale\n%s", old)
		}
		if !strings.Contains(body, "3 instances, 1 stale") {
			t.Errorf("the app's heading does not count its instances\n%s", body)
		}
	})

	t.Run("an instance's page", func(t *testing.T) {
		status, body := cl.get("/ui/apps/checkout/instances/checkout-1")
		if status != http.StatusOK {
			t.Fatalf("instance page: %d\n%s", status, body)
		}
		sw := between(t, body, `href="/ui/apps/checkout/switches/recommend"`, "</tr>")
		for _, want := range []string{`<td data-label="Degraded">10/s <small>(50 since start)</small></td>`, `<td data-label="Fallbacks">10/s <small>(50 since start)</small></td>`} {
			if !strings.Contains(sw, want) {
				t.Errorf("the instance's switch row lacks %s\n%s", want, sw)
			}
		}
		lim := between(t, body, "<code>POST /orders</code>", "</tr>")
		for _, want := range []string{`<td data-label="Allowed">20/s <small>(100 since start)</small></td>`, `<td data-label="Rejected">5/s <small>(25 since start)</small></td>`} {
			if !strings.Contains(lim, want) {
				t.Errorf("the instance's rule row lacks %s\n%s", want, lim)
			}
		}
		if status, body := cl.get("/ui/apps/checkout/instances/gone-1"); status != http.StatusNotFound || !strings.Contains(body, "There is no live instance checkout/gone-1") {
			t.Errorf("a gone instance: %d\n%s", status, body)
		}
		if _, body := cl.get("/ui/apps/checkout/instances/checkout-old"); !strings.Contains(body, "no signals (SDK too old)") {
			t.Errorf("the old SDK's page does not say it sends no signals\n%s", body)
		}
	})

	t.Run("switch page", func(t *testing.T) {
		_, body := cl.get("/ui/apps/checkout/switches/recommend")
		facts := between(t, body, `<dl class="facts">`, "</dl>")
		for _, want := range []string{
			"applied by 2/3", `href="/ui/apps/checkout/instances"`,
			`<dt>Answering degraded</dt><dd id="answering-degraded">1 of 2 reporting instances</dd>`,
			"<dt>Degraded answers</dt><dd>10/s", "<dt>Fallbacks served</dt><dd>10/s</dd>",
			"<dt>Degraded-path p99</dt><dd>≤ 2ms</dd>", "<dt>Last read</dt><dd title=\"" + now.Format("2006-01-02 15:04:05") + " UTC\">",
		} {
			if !strings.Contains(facts, want) {
				t.Errorf("the switch's facts lack %s\n%s", want, facts)
			}
		}
	})

	t.Run("etcd down", func(t *testing.T) {
		etcd.Stop()
		defer etcd.Restart()
		waitFleet(t, c, "that etcd is down", func(m *fleet.Model) bool { return !m.Synced() })
		_, body := cl.get("/ui/")
		if !strings.Contains(body, "etcd did not answer: convergence is unknown") || !strings.Contains(between(t, body, `id="on-checkout-recommend"`, "</tr>"), "applied: unknown") {
			t.Errorf("with etcd down the Overview does not say convergence is unknown\n%s", body)
		}
		_, body = cl.get("/ui/instances")
		if !strings.Contains(body, "etcd did not answer") || !strings.Contains(body, `id="inst-checkout-checkout-1"`) {
			t.Errorf("with etcd down the Instances page does not show the last known instances with a warning\n%s", body)
		}
	})

	t.Run("a change after the last reports", func(t *testing.T) {
		// Reports are stamped to the second: the change must fall in a
		// later one than theirs to be after them.
		time.Sleep(time.Until(time.Unix(at+1, 0)))
		if _, _, err := c.Service.TurnOff(ctx, admin, "checkout", "recommend", server.Toggle{Reason: "recovered"}); err != nil {
			t.Fatal(err)
		}
		_, body := cl.get("/ui/apps/checkout/switches/recommend")
		if got := between(t, body, `id="answering-degraded">`, "</dd>"); !strings.Contains(got, `id="signals-stale"`) || !strings.Contains(got, "before the last change") {
			t.Errorf("after turning the switch off, the answering figure does not say it predates the change: %s", got)
		}
		later := time.Now().Unix()
		for _, id := range []string{"checkout-1", "checkout-2"} {
			putInstance(t, c, wire.Instance{App: "checkout", InstanceID: id, SDKVersion: "v1.0.0", AppliedRevision: rev, AppliedAt: now,
				StartedAt: now.Add(-5 * time.Second), ReportInterval: iv, Report: &wire.Report{At: later, Switches: map[string]wire.SwitchSignal{"recommend": {Degraded: 50, LastRead: at}}}})
			waitFleet(t, c, id+"'s next report", reported("checkout", id, later))
		}
		_, body = cl.get("/ui/apps/checkout/switches/recommend")
		if strings.Contains(body, `id="signals-stale"`) {
			t.Error("the next reports did not clear the note")
		}
	})
}

// sse reads an event stream and sends the type of each event.
func sse(t testing.TB, c *console.Console, cl *client, path string) <-chan string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.URL()+path, nil)
	req.Header.Set("Accept", "text/event-stream")
	res, err := (&http.Client{Jar: cl.http.Jar}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", path, res.StatusCode)
	}
	out := make(chan string, 64)
	go func() {
		defer res.Body.Close()
		defer close(out)
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			if ev, ok := strings.CutPrefix(sc.Text(), "event: "); ok {
				select {
				case out <- ev:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out
}

// next waits for the next event of type want on ch and returns the types
// of the events before it.
func next(t testing.TB, ch <-chan string, want string) []string {
	t.Helper()
	var before []string
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("the stream ended waiting for %q", want)
			}
			if ev == want {
				return before
			}
			before = append(before, ev)
		case <-timeout:
			t.Fatalf("no %q event within 10 s (got %v)", want, before)
		}
	}
}

// TestFleetEvents: pages that show the fleet (Overview, Switches, a switch,
// Instances) follow it on the stream's "fleet" events, at most one a
// second; an instance report wakes no other page: the Audit, Limits and
// Admin pages ask for a stream without them.
func TestFleetEvents(t *testing.T) {
	c := startConsole(t)
	ctx := context.Background()
	cl := newClient(t, c)
	cl.signIn("admin", bootstrapToken)
	if _, _, err := c.Service.CreateSwitch(ctx, admin, "checkout", server.SwitchInput{Name: "recommend", Level: wire.L3, Reason: "seed"}); err != nil {
		t.Fatal(err)
	}
	for path, fleet := range map[string]bool{
		"/ui/": true, "/ui/switches": true, "/ui/apps/checkout/switches/recommend": true, "/ui/instances": true, "/ui/apps/checkout/instances": true,
		"/ui/audit": false, "/ui/limits": false, "/ui/admin": false, "/ui/account": false,
	} {
		_, body := cl.get(path)
		want := `data-live-url="/ui/events"`
		if fleet {
			want = `data-live-url="/ui/events?fleet=1"`
		}
		if !strings.Contains(body, want) {
			t.Errorf("%s: want %s", path, want)
		}
	}

	plain := sse(t, c, cl, "/ui/events")
	withFleet := sse(t, c, cl, "/ui/events?fleet=1")
	report := func(at time.Time, degraded uint64) {
		putInstance(t, c, wire.Instance{App: "checkout", InstanceID: "pod-1", SDKVersion: "v1.0.0", StartedAt: at.Add(-time.Minute), ReportInterval: wire.Duration(10 * time.Second),
			Report: &wire.Report{At: at.Unix(), Switches: map[string]wire.SwitchSignal{"recommend": {Degraded: degraded, LastRead: at.Unix()}}}})
	}
	now := time.Now()
	report(now, 10)
	next(t, withFleet, "fleet")
	start := time.Now()
	report(now.Add(10*time.Second), 20)
	next(t, withFleet, "fleet")
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("the second report took %v to be announced", d)
	}

	// The plain stream is open and hears changes, but heard no report.
	if _, _, err := c.Service.TurnOn(ctx, admin, "checkout", "recommend", server.Toggle{Reason: "INC-9"}); err != nil {
		t.Fatal(err)
	}
	heard := next(t, plain, "change")
	next(t, withFleet, "fleet") // the flip, as the fleet model saw it
	for len(plain) > 0 {
		heard = append(heard, <-plain)
	}
	if slices.Contains(heard, "fleet") {
		t.Errorf("the stream of a page without fleet data got %v", heard)
	}
}
