package webui_test

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/sdk/wire"
	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/console"
	"github.com/switchyard-io/switchyard/server/fleet"
)

var updateScreenshots = flag.Bool("update-screenshots", false, "regenerate docs/screenshots/*.png")

// TestScreenshots writes the README's and docs/web-console.md's
// screenshots: the Overview, a switch detail, the audit log and the other
// lists at 1280×800; the staged-rollout form and an auto-trigger rule at
// 1280 and at phone width (390×844), as are the Overview and a switch:
//
//	go test ./server/webui -run TestScreenshots -update-screenshots
func TestScreenshots(t *testing.T) {
	if !*updateScreenshots {
		t.Skip("run with -update-screenshots to regenerate docs/screenshots")
	}
	root := browser(t)
	c := startConsole(t)
	s := newSession(t, root, c)
	s.signIn("admin", bootstrapToken)
	seedDemo(t, c)

	// The rule comes after the shots of the lists, whose newest rows it
	// would otherwise be.
	addRule := func() {
		api(t, s.base, "POST", "/api/v1/apps/checkout/triggers", `{"name":"degraded-surge","switch":"recommend","source":"fleet",
			"description":"Turn the recommender off when the fleet answers degraded en masse",
			"query":"degraded_rate{switch=\"recommend\"}","trigger":{"op":">","threshold":180,"for":"1m"},"recover":{"op":"<","threshold":20,"for":"5m"},
			"mode":"dry_run","reason":"INC-1042 follow-up: trip it before people have to"}`, 201)
	}

	dir := filepath.Join("..", "..", "docs", "screenshots")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	shots := []struct {
		file, path string
		w, h       int64
		// open is a details element to open, or an element, to scroll
		// to ("": the top).
		open string
		// before, when set, runs before the shot.
		before func()
	}{
		{"overview.png", "/ui/", 1280, 800, "", nil},
		{"switch-detail.png", "/ui/apps/checkout/switches/recommend", 1280, 800, "", nil},
		{"audit-log.png", "/ui/audit", 1280, 800, "", nil},
		{"switches.png", "/ui/switches", 1280, 800, "", nil},
		{"limit-editor.png", "/ui/limits/edit?app=checkout&resource=POST+%2Forders", 1280, 800, "", nil},
		{"instances.png", "/ui/apps/checkout/instances", 1280, 800, "", nil},
		{"instance.png", "/ui/apps/checkout/instances/checkout-7f9c-1", 1280, 800, "", nil},
		{"overview-phone.png", "/ui/", 390, 844, "", nil},
		{"switch-detail-phone.png", "/ui/apps/checkout/switches/recommend", 390, 844, "", nil},
		{"rollout-form.png", "/ui/apps/checkout/switches/orders-read-only", 1280, 800, "#staged-rollout", nil},
		{"rollout-form-phone.png", "/ui/apps/checkout/switches/orders-read-only", 390, 844, "#staged-rollout", nil},
		{"trigger-rule.png", "/ui/apps/checkout/triggers/degraded-surge", 1280, 1150, "", addRule},
		{"trigger-rule-phone.png", "/ui/apps/checkout/triggers/degraded-surge", 390, 844, "#preview", nil},
	}
	for _, sh := range shots {
		if sh.before != nil {
			sh.before()
		}
		var png []byte
		s.do("screenshot "+sh.path,
			chromedp.EmulateViewport(sh.w, sh.h),
			chromedp.Navigate(s.base+sh.path),
			chromedp.WaitVisible(chromedp.CSS("main")),
			// Settled: loaded, fonts in, script run, stream open.
			chromedp.Poll[chromedp.Void](`document.readyState === "complete" && document.fonts.status === "loaded" && document.getElementById("live-status").textContent === "● live"`, chromedp.WithPollingTimeout(10*time.Second)),
			chromedp.Evaluate[chromedp.Void](`(() => { const d = "`+sh.open+`" && document.querySelector("`+sh.open+`"); if (d && d.tagName === "DETAILS") d.open = true })()`),
			// Opening a form focuses its first field, which scrolls; the
			// shot scrolls back to the element's top after that.
			chromedp.Sleep(300*time.Millisecond),
			chromedp.Evaluate[chromedp.Void](`(() => { const d = "`+sh.open+`" && document.querySelector("`+sh.open+`"); if (d) d.scrollIntoView() })()`),
			chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
				var err error
				png, err = chromedp.CaptureScreenshot()(ctx, tg)
				return err
			}),
		)
		if err := os.WriteFile(filepath.Join(dir, sh.file), png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s (%d bytes)", sh.file, len(png))
	}
}

// seedDemo fills the console with a plausible incident: switches on at
// several levels, a history with a rollback, limit rules and instances.
func seedDemo(t testing.TB, c *console.Console) {
	t.Helper()
	ctx := context.Background()
	alice := server.Actor{Name: "alice", Kind: audit.ActorUser, Role: server.RoleAdmin}
	bob := server.Actor{Name: "bob", Kind: audit.ActorUser, Role: server.RoleAdmin}
	ci := server.Actor{Name: "token:ci-deploy", Kind: audit.ActorToken, Role: server.RoleAdmin}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	mk := func(a server.Actor, app string, in server.SwitchInput) {
		_, _, err := c.Service.CreateSwitch(ctx, a, app, in)
		must(err)
	}
	on := func(a server.Actor, app, name, reason string, r wire.Rollout) {
		_, _, err := c.Service.TurnOn(ctx, a, app, name, server.Toggle{Reason: reason, Rollout: &r})
		must(err)
	}
	mk(ci, "checkout", server.SwitchInput{Name: "recommend", Level: wire.L3, Owner: "team-growth", Runbook: "runbooks/L3-feature-off.md",
		Description: "Personalised recommendations on the cart page", Reason: "declared in checkout v2.14"})
	mk(ci, "checkout", server.SwitchInput{Name: "price-cache", Level: wire.L2, MaxStaleness: "5m", Owner: "team-pricing",
		Description: "Serve cached prices when the pricing service is slow", Reason: "declared in checkout v2.14"})
	mk(ci, "checkout", server.SwitchInput{Name: "orders-read-only", Level: wire.L4, Owner: "team-orders",
		Description: "Stop order writes during a database failover", Reason: "declared in checkout v2.14"})
	mk(ci, "search", server.SwitchInput{Name: "suggestions", Level: wire.L1, Fallback: json.RawMessage(`{"items":[],"source":"fallback"}`),
		Owner: "team-search", Description: "Empty suggestion list instead of calling the ML ranker", Reason: "declared in search v5.2"})
	mk(ci, "payments", server.SwitchInput{Name: "refund-queue", Level: wire.L5, Owner: "team-payments",
		Description: "Queue refunds while the ledger is degraded", Reason: "declared in payments v1.9"})
	on(alice, "checkout", "recommend", "INC-1042 recommender p99 at 4 s", wire.Rollout{Percent: 25, Stickiness: wire.StickyInstance})
	on(alice, "checkout", "recommend", "INC-1042 widen: p99 still high", wire.Rollout{Percent: 100, Stickiness: wire.StickyInstance})
	_, _, err := c.Service.TurnOff(ctx, bob, "checkout", "recommend", server.Toggle{Reason: "INC-1042 recovered"})
	must(err)
	events, _, err := audit.List(ctx, c.DB, audit.Filter{Target: "switch/checkout/recommend", Limit: 10})
	must(err)
	_, _, err = c.Service.RollbackSwitch(ctx, alice, "checkout", "recommend", events[1].ID, server.Change{Reason: "INC-1042 relapse: back to 100 %"})
	must(err)
	on(bob, "search", "suggestions", "ML ranker OOM-looping, INC-1047", wire.Rollout{Percent: 50, Stickiness: wire.StickyKey, Selector: "zone=eu-1"})
	on(alice, "checkout", "price-cache", "pricing DB failover (CHG-311)", wire.Rollout{Percent: 5, Stickiness: wire.StickyInstance, Selector: "canary=true"})
	_, _, err = c.Service.CreateLimit(ctx, alice, "checkout", server.LimitInput{LimitRule: wire.LimitRule{Resource: "POST /orders", Kind: wire.KindTokenBucket, Rate: 200, Burst: 50}, Reason: "protect the orders DB"})
	must(err)
	_, _, err = c.Service.CreateLimit(ctx, bob, "payments", server.LimitInput{LimitRule: wire.LimitRule{Resource: "ledger", Kind: wire.KindBreaker, ErrorRate: 0.5, MinRequests: 20,
		Window: wire.Duration(10 * time.Second), OpenDuration: wire.Duration(5 * time.Second), HalfOpenProbes: 1}, Reason: "ledger timeouts cascade into checkout"})
	must(err)
	_, _, err = c.Service.CreateLimit(ctx, alice, "search", server.LimitInput{LimitRule: wire.LimitRule{Resource: "GET /suggest", Kind: wire.KindConcurrency, Max: 64, Mode: wire.ModeShadow}, Reason: "measure before enforcing"})
	must(err)

	// Instances as SDKs write their keys: most have applied the newest
	// revision and report signals; one runs an SDK too old to report and
	// lags behind. An hour of reports (ten-second counters, sampled every
	// five minutes) gives the Overview's sparklines their shape.
	waitPublished(t, c)
	rev := etcdRevision(t, c)
	now := time.Now().UTC().Truncate(time.Second)
	type pod struct {
		app, id string
		labels  map[string]string
		// per report: degraded answers of each switch and rejections of
		// each rule since the previous one
		switches map[string]uint64
		limits   map[string]wire.LimitSignal
		breaker  string
	}
	pods := []pod{
		{"checkout", "checkout-7f9c-1", map[string]string{"zone": "eu-1", "canary": "true"}, map[string]uint64{"recommend": 420, "price-cache": 90}, map[string]wire.LimitSignal{"POST /orders": {Allowed: 1900, Rejected: 60}}, ""},
		{"checkout", "checkout-7f9c-2", map[string]string{"zone": "eu-2", "canary": "false"}, map[string]uint64{"recommend": 380}, map[string]wire.LimitSignal{"POST /orders": {Allowed: 2000, Rejected: 45}}, ""},
		{"checkout", "checkout-7f9c-3", map[string]string{"zone": "eu-1", "canary": "false"}, map[string]uint64{"recommend": 400}, map[string]wire.LimitSignal{"POST /orders": {Allowed: 1950, Rejected: 50}}, ""},
		{"search", "search-55d2-1", map[string]string{"zone": "eu-1"}, map[string]uint64{"suggestions": 260}, map[string]wire.LimitSignal{"GET /suggest": {Allowed: 3000, ShadowRejected: 120}}, ""},
		{"search", "search-55d2-2", map[string]string{"zone": "eu-2"}, map[string]uint64{"suggestions": 0}, map[string]wire.LimitSignal{"GET /suggest": {Allowed: 2800, ShadowRejected: 90}}, ""},
		{"payments", "payments-31a0-1", map[string]string{"zone": "eu-1"}, nil, map[string]wire.LimitSignal{"ledger": {Allowed: 300}}, wire.BreakerOpen},
	}
	// shape scales each report's counts: quiet an hour ago, the incident
	// peaking half an hour ago, easing since.
	shape := []float64{0, 0, 0.05, 0.3, 0.9, 1.4, 1.2, 1, 0.8, 0.7, 0.6, 0.5}
	total := map[string]*wire.Report{}
	for k, f := range shape {
		at := now.Add(-time.Duration(len(shape)-1-k) * 10 * time.Second)
		for _, p := range pods {
			r := total[p.id]
			if r == nil {
				r = &wire.Report{Switches: map[string]wire.SwitchSignal{}, Limits: map[string]wire.LimitSignal{}}
				total[p.id] = r
			}
			r.At = at.Unix()
			for name, n := range p.switches {
				sig := r.Switches[name]
				sig.Degraded += uint64(f * float64(n))
				if name == "suggestions" {
					sig.Fallbacks = sig.Degraded
				}
				sig.LastRead = at.Unix()
				sig.Latency = []uint64{sig.Degraded * 7 / 10, sig.Degraded * 2 / 10, sig.Degraded / 10}
				r.Switches[name] = sig
			}
			for res, l := range p.limits {
				sig := r.Limits[res]
				sig.Allowed += l.Allowed
				sig.Rejected += uint64(f * float64(l.Rejected))
				sig.ShadowRejected += uint64(f * float64(l.ShadowRejected))
				sig.Breaker = p.breaker
				r.Limits[res] = sig
			}
			b, _ := json.Marshal(r)
			var sent wire.Report
			must(json.Unmarshal(b, &sent)) // a copy: later reports add to r
			putInstance(t, c, wire.Instance{App: p.app, InstanceID: p.id, Labels: p.labels, SDKVersion: "v1.2.0", AppliedRevision: rev,
				AppliedAt: now.Add(-3 * time.Minute), StartedAt: now.Add(-3 * time.Hour), ReportInterval: wire.Duration(10 * time.Second), Report: &sent})
		}
		for _, p := range pods {
			waitFleet(t, c, p.id+"'s report", reported(p.app, p.id, at.Unix()))
		}
		c.Fleet.Sample(time.Now().Add(-time.Duration(len(shape)-1-k) * 5 * time.Minute))
	}
	putInstance(t, c, wire.Instance{App: "checkout", InstanceID: "checkout-7f9c-4", Labels: map[string]string{"zone": "eu-2", "canary": "false"}, SDKVersion: "v0.9.0",
		AppliedRevision: rev - 6, AppliedAt: now.Add(-40 * time.Minute), StartedAt: now.Add(-5 * time.Hour)})
	waitFleet(t, c, "checkout-7f9c-4", func(m *fleet.Model) bool { _, ok := m.Instance("checkout", "checkout-7f9c-4"); return ok })
}

// waitPublished waits until etcd holds every switch at its database version
// and every limit rule that is on.
func waitPublished(t testing.TB, c *console.Console) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	published := func(key string, version int64) bool {
		res, err := c.Etcd.Get(ctx, key)
		if err != nil || len(res.Kvs) == 0 {
			return false
		}
		var v struct {
			Version int64 `json:"version"`
		}
		return json.Unmarshal(res.Kvs[0].Value, &v) == nil && v.Version >= version
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		sws, err := c.Service.ListSwitches(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		rules, err := c.Service.ListLimits(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		done := true
		for _, s := range sws {
			done = done && published(wire.SwitchKey(c.Config.Namespace, s.App, s.Name), s.Version)
		}
		for _, r := range rules {
			done = done && (r.State != wire.StateOn || published(wire.LimitKey(c.Config.Namespace, r.App, r.Resource), r.Version))
		}
		if done {
			return
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatal("the publisher did not publish the seeded switches and rules within 10 s")
		}
	}
}

func clientv3WithCountOnly() []clientv3.OpOption {
	return []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithCountOnly()}
}
