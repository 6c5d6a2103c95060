package webui_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/switchyard-io/switchyard/sdk/wire"
	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/finding"
)

// api calls the JSON API as the bootstrap admin and fails the test unless
// it answers want.
func api(t *testing.T, base, method, path, body string, want int) {
	t.Helper()
	if got := apiCall(t, base, method, path, body); got != want {
		t.Fatalf("%s %s: %d, want %d", method, path, got, want)
	}
}

// TestBrowserFirstHour walks, in real Chromium at 1280 and 390 px, the
// pages a new user met in their first hour (issue 16): the plan picker's
// radios, the new rule's chart, times that keep to one line, the empty
// and half-empty places of the switch page, and forms that leave the
// browser on a page a reload does not re-post.
func TestBrowserFirstHour(t *testing.T) {
	root := browser(t)
	rc := startRolloutConsole(t, "web-1")
	c, ctx := rc.Console, context.Background()
	for _, in := range []server.SwitchInput{{Name: "orders.readonly.during.dbfailover", Level: wire.L4, Reason: "seed"}, {Name: "banners", Level: wire.L3, Reason: "seed"}} {
		if _, _, err := c.Service.CreateSwitch(ctx, admin, "checkout", in); err != nil {
			t.Fatal(err)
		}
	}
	s := newSession(t, root, c)
	s.signIn("admin", bootstrapToken)
	sw := s.base + "/ui/apps/checkout/switches/recommend"
	vp := func(w, h int64) { s.do("viewport", chromedp.EmulateViewport(w, h)) }
	open := func(url, sel string) {
		t.Helper()
		s.do("open "+url, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS(sel)))
	}

	t.Run("12 the plan's radio sits left of its label, which picks it", func(t *testing.T) {
		s.t = t
		for _, w := range []int64{1280, 390} {
			vp(w, 844)
			open(sw, `#staged-rollout summary`)
			s.do("open the plans", chromedp.Click(chromedp.CSS(`#staged-rollout summary`)))
			got := s.eval(`(() => { const out = [];
				for (const l of document.querySelectorAll("#rollout-form label.choice")) {
					const r = l.querySelector("input[type=radio]").getBoundingClientRect(), t = l.querySelector("span").getBoundingClientRect();
					out.push(r.right <= t.left && r.top < t.top + 24 ? "ok" : "radio at " + [r.left, r.top] + ", text at " + [t.left, t.top]);
				}
				return out.join(" ") })()`)
			if got == "" || strings.Trim(strings.ReplaceAll(got, "ok", ""), " ") != "" {
				t.Errorf("at %d px the radios are not left of their labels: %s", w, got)
			}
		}
		// Clicking the words of a plan, not its radio, picks it.
		s.do("click a plan's text", chromedp.Click(chromedp.CSS(`#rollout-form label.choice:not(.muted):not(:has(input:checked)) span`)))
		if n := s.eval(`String(document.querySelector("#rollout-form label.choice:not(.muted) input:checked") !== document.querySelector("#rollout-form label.choice:not(.muted) input"))`); n != "true" {
			t.Error("clicking a plan's label did not pick it")
		}
	})

	t.Run("13 a new rule's chart fills the width with round ticks from 0", func(t *testing.T) {
		s.t = t
		vp(1280, 900)
		// Three minutes of fleet history, as a console that just started has.
		now := time.Now()
		for _, ago := range []time.Duration{3 * time.Minute, 2 * time.Minute, time.Minute, 0} {
			c.Fleet.Sample(now.Add(-ago))
		}
		api(t, s.base, http.MethodPost, "/api/v1/apps/checkout/triggers", `{"name":"degraded-high","switch":"recommend","source":"fleet",
			"query":"degraded_rate{switch=\"recommend\"}","trigger":{"op":">","threshold":10.0327,"for":"1m"},"recover":{"op":"<","threshold":2,"for":"5m"},"reason":"seed"}`, http.StatusCreated)
		open(s.base+"/ui/apps/checkout/triggers/degraded-high", `#preview svg`)
		got := s.eval(`(() => {
			const svg = document.querySelector("#preview svg"), plot = svg.querySelector("rect").getBBox(), line = svg.querySelector("polyline");
			const ticks = [...svg.querySelectorAll("text[dominant-baseline=middle]")].map(e => e.textContent);
			const clipped = [...svg.querySelectorAll("text")].filter(e => { const b = e.getBBox(); return b.x < 0 || b.x + b.width > 720 || b.y + b.height > 240 }).map(e => e.textContent);
			const first = line ? Number(line.getAttribute("points").split(/[ ,]/)[0]) : -1;
			return JSON.stringify({startsAtLeft: Math.abs(first - plot.x) < 1, ticks, clipped});
		})()`)
		if !strings.Contains(got, `"startsAtLeft":true`) || !strings.Contains(got, `"clipped":[]`) || !strings.Contains(got, `"ticks":["0","2.5","5","7.5","10","12.5"]`) {
			t.Errorf("the chart (starts at the first sample, round ticks from 0, no label clipped): %s", got)
		}
	})

	t.Run("15 times keep to one line", func(t *testing.T) {
		s.t = t
		if _, _, err := c.Service.TurnOn(ctx, admin, "checkout", "recommend", server.Toggle{Reason: "INC-9 recommender slow"}); err != nil {
			t.Fatal(err)
		}
		const oneLine = `(() => { const st = [...document.querySelectorAll(".stamp")]; return st.length + " " + st.filter(e => e.getClientRects().length !== 1).length })()`
		for _, w := range []int64{1280, 390} {
			vp(w, 844)
			for _, p := range []string{sw, s.base + "/ui/audit"} {
				open(p, `main`)
				if got := strings.Fields(s.eval(oneLine)); got[0] == "0" || got[1] != "0" {
					t.Errorf("at %d px on %s, %s of %s times break across lines", w, p, got[1], got[0])
				}
				if sw := s.eval(`String(document.documentElement.scrollWidth)`); sw != strconv.FormatInt(w, 10) {
					t.Errorf("at %d px %s is %s px wide", w, p, sw)
				}
			}
		}
		// The confirm page's title keeps inside its card at 390 px.
		open(s.base+"/ui/apps/checkout/switches/orders.readonly.during.dbfailover", `#turn-on`)
		s.do("turn on L4", chromedp.SendKeys(chromedp.CSS(`#on-reason`), "CHG-1 failover"), chromedp.Click(chromedp.CSS(`#turn-on button[type=submit]`)), chromedp.WaitVisible(chromedp.CSS(`#confirm`)))

		// The title's text, not only its box, keeps 12 px from the card's edges.
		got := s.eval(`(() => { const c = document.querySelector(".confirm").getBoundingClientRect(), r = document.createRange();
			r.selectNodeContents(document.querySelector(".confirm h1")); const h = r.getBoundingClientRect();
			return String(Math.round(Math.min(h.left - c.left, c.right - h.right, h.top - c.top))) })()`)
		if n, _ := strconv.Atoi(got); n < 12 {
			t.Errorf("the confirm page's title is %s px from its card's edge, want ≥ 12: %q", got, s.eval(`document.querySelector(".confirm h1").textContent`))
		}
	})

	t.Run("16 no empty headings, gaps, dangling crumbs or blank cells", func(t *testing.T) {
		s.t = t
		vp(1280, 844)
		open(s.base+"/ui/apps/checkout/switches/banners", `#switch-rollouts`)
		if s.eval(`String(document.getElementById("expiry-h"))`) != "null" {
			t.Error("the page of a switch that is off has an Expiry heading")
		}
		got := s.eval(`[...document.querySelectorAll("section.card")].map(c => c.id + ":" + Math.round(c.querySelector("h2").getBoundingClientRect().top - c.getBoundingClientRect().top)).join(" ")`)
		for _, card := range strings.Fields(got) {
			// The card's border and padding are about 16 px; a heading's own
			// margin on top of them made the gap.
			id, gap, _ := strings.Cut(card, ":")
			if n, _ := strconv.Atoi(gap); n > 20 {
				t.Errorf("card %q's title is %s px below its top, want ≤ 20", id, gap)
			}
		}
		for _, p := range []string{"/ui/apps/checkout/switches/banners", "/ui/apps/checkout/triggers/degraded-high", "/ui/apps/checkout/instances/web-1", "/ui/limits/edit?app=checkout"} {
			open(s.base+p, `.crumbs`)
			if crumbs := s.eval(`document.querySelector(".crumbs").textContent.trim()`); strings.HasSuffix(crumbs, "/") {
				t.Errorf("the breadcrumbs of %s end in a slash: %q", p, crumbs)
			}
		}
		open(s.base+"/ui/apps/checkout/triggers/new?switch=banners", `#rule-form`)
		if h1 := s.eval(`(document.querySelector("main h1") || {textContent: ""}).textContent`); h1 != "New auto-trigger for checkout" {
			t.Errorf("the new-rule page's title is %q", h1)
		}
		vp(390, 844)
		open(s.base+"/ui/switches?app=checkout", `#row-checkout-banners`)
		cells := s.eval(`[...document.querySelectorAll('#row-checkout-banners td[data-label="Owner"], #row-checkout-banners td[data-label="Applied"]')].map(td => getComputedStyle(td, "::before").content.replaceAll('"', "") + td.innerText.trim()).join(" | ")`)
		if cells != "Owner: — | Applied: —" {
			t.Errorf("the phone card of a switch without owner, off: %q", cells)
		}
	})

	t.Run("18 previews and tests leave a page a reload does not re-post", func(t *testing.T) {
		s.t = t
		vp(1280, 900)
		open(s.base+"/ui/", `#quick-on summary`)
		if ph := s.eval(`document.querySelector('#quick-on-form input[name=switch]').placeholder`); ph != "checkout/banners" {
			t.Errorf("the quick turn-on suggests %q, want a switch that is off", ph)
		}
		open(s.base+"/ui/apps/checkout/triggers/new?switch=banners", `#rule-form`)
		if ph := s.eval(`document.querySelector('#rule-form input[name=query]').placeholder`); ph != `degraded_rate{switch="banners"}` {
			t.Errorf("without Prometheus the query's example is %q", ph)
		}
		open(s.base+"/ui/apps/checkout/triggers/degraded-high", `#rule-form`)
		s.do("preview a draft", chromedp.SetValue(chromedp.CSS(`#rule-form input[name="trigger.threshold"]`), "20"),
			chromedp.Click(chromedp.CSS(`#rule-form button[value=preview]`)), chromedp.WaitVisible(chromedp.CSS(`#preview[data-draft]`)))
		s.do("reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`#preview[data-draft]`)))
		if got := s.eval(`location.pathname + " " + new URLSearchParams(location.search).get("trigger.threshold") + " " + performance.getEntriesByType("navigation")[0].type + " " + document.querySelector('#rule-form input[name="trigger.threshold"]').value`); got != "/ui/apps/checkout/triggers/degraded-high 20 reload 20" {
			t.Errorf("after Preview and a reload: %q, want the rule's page with the draft", got)
		}

		var hits atomic.Int64
		rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
		t.Cleanup(rcv.Close)
		if err := c.Egress.Allow(rcv.Listener.Addr().String()); err != nil { // the receiver this test started
			t.Fatal(err)
		}
		api(t, s.base, http.MethodPost, "/api/v1/channels", `{"name":"ops","url":"`+rcv.URL+`/hook","secret":"a-long-enough-secret-1","events":["channel.test"],"reason":"seed"}`, http.StatusCreated)
		open(s.base+"/ui/channels", `#verify-help`)
		s.do("send a test", chromedp.SetValue(chromedp.CSS(`form[action="/ui/channels/ops/test"] input[name="reason"]`), "check the receiver"),
			chromedp.Click(chromedp.CSS(`form[action="/ui/channels/ops/test"] button`)), chromedp.WaitVisible(chromedp.CSS(`#test-result`)))
		s.do("reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`#test-result`)))
		if n := hits.Load(); n != 1 {
			t.Errorf("Send test and a reload sent %d requests, want 1", n)
		}

		for _, sp := range []finding.Spec{{Kind: finding.RolloutPaused, Target: "rollout/checkout/recommend#7", App: "checkout", Severity: finding.Warning, Summary: "paused"},
			{Kind: finding.DrillFailed, Target: "drill/checkout/reco", App: "checkout", Severity: finding.Warning, Summary: "failed", Detail: "report: /ui/apps/checkout/drills/reco/runs/3"}} {
			if _, err := finding.Open(c.DB, sp, time.Now()); err != nil {
				t.Fatal(err)
			}
		}
		open(s.base+"/ui/findings", `#findings table`)
		links := s.eval(`[...document.querySelectorAll('#findings td a:not([href*="/switches/"])')].map(a => a.getAttribute("href")).sort().join(" ")`)
		if links != "/ui/apps/checkout/drills/reco /ui/apps/checkout/drills/reco/runs/3 /ui/apps/checkout/rollouts/7" {
			t.Errorf("the findings link %q", links)
		}
	})
}
