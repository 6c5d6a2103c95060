package webui_test

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/internal/promtest"
	"github.com/switchyard-io/switchyard/sdk/wire"
	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/console"
	"github.com/switchyard-io/switchyard/server/webui"
)

// startTriggerConsole runs a console whose triggers query prom every
// 500 ms, with the switch checkout/recommend.
func startTriggerConsole(t *testing.T, prom *promtest.Server) *console.Console {
	t.Helper()
	c := startConsoleWith(t, webui.Options{Clock: fastClock{}}, func(cfg *console.Config) {
		cfg.PrometheusURL, cfg.TriggerInterval = prom.URL, 500*time.Millisecond
	})
	if _, _, err := c.Service.CreateSwitch(context.Background(), admin, "checkout", server.SwitchInput{Name: "recommend", Level: wire.L3, Reason: "seed"}); err != nil {
		t.Fatal(err)
	}
	return c
}

// ruleForm is the editor's form for a rule on checkout/recommend.
func ruleForm(tok string, kv ...string) url.Values {
	f := url.Values{"_csrf": {tok}, "name": {"cpu-high"}, "switch": {"recommend"}, "mode": {"enforce"}, "source": {"prometheus"},
		"query": {"max(ui_cpu)"}, "trigger.op": {">"}, "trigger.threshold": {"80"}, "trigger.for": {"1s"},
		"recover.op": {"<"}, "recover.threshold": {"60"}, "recover.for": {"1s"}, "cooldown": {"0s"}, "on_no_data": {"hold"},
		"flap.max_transitions": {"4"}, "flap.window": {"1h"}, "range": {"1m"}, "reason": {"protect the cart"}, "action": {"save"}}
	for i := 0; i+1 < len(kv); i += 2 {
		f.Set(kv[i], kv[i+1])
	}
	return f
}

// noInlineCode checks a page against what the CSP forbids: inline styles
// and scripts.
func noInlineCode(t *testing.T, body string) {
	t.Helper()
	if strings.Contains(body, " style=") || regexp.MustCompile(`<script>|<script [^>]*>[^<]`).MatchString(body) || strings.Contains(body, " on"+"click=") {
		t.Fatal("the page carries inline styles or scripts, which the CSP forbids")
	}
}

// TestTriggerPages: the editor previews a draft over a real Prometheus as
// an SVG chart (threshold lines, fired and recovered marks) without saving
// it, names the bad field under its input, creates the rule; the switch
// page lists the rule with its live state, says when a person's change
// paused it, and resumes it in one click; viewers read without forms.
func TestTriggerPages(t *testing.T) {
	prom := promtest.Start(t)
	c := startTriggerConsole(t, prom)
	ctx := context.Background()
	cl := newClient(t, c)
	cl.signIn("admin", bootstrapToken)
	tok := cl.csrf("/ui/")
	// A minute of history: 50, then above 80 for 3 s, then 40.
	for _, v := range []float64{50, 90, 40} {
		prom.Exporter.Set("ui_cpu", v)
		for range 6 {
			prom.Sync(t)
		}
	}

	status, body := cl.get("/ui/apps/checkout/triggers/new?switch=recommend")
	if status != http.StatusOK || !strings.Contains(body, `id="rule-form"`) || !strings.Contains(body, `<option selected>recommend</option>`) {
		t.Fatalf("new rule page: %d\n%s", status, body)
	}

	// preview posts the editor's Preview and follows it to the page that
	// shows the draft (post/redirect/get).
	preview := func(t *testing.T, form url.Values) (int, string) {
		t.Helper()
		status, loc, body := cl.post("/ui/apps/checkout/triggers", form)
		if status != http.StatusSeeOther || !strings.HasPrefix(loc, "/ui/apps/checkout/triggers/new?draft=1&") || strings.Contains(loc, "_csrf") {
			t.Fatalf("preview: %d %q\n%s", status, loc, body)
		}
		return cl.get(loc)
	}

	t.Run("a threshold on the wrong side is marked at its input", func(t *testing.T) {
		status, body := preview(t, ruleForm(tok, "recover.threshold", "85", "action", "preview"))
		if status != http.StatusBadRequest || !fieldErr("recover.threshold", "Threshold", "must be below the trigger threshold 80 (the safe side), got 85").MatchString(body) {
			t.Fatalf("%d\n%s", status, body)
		}
		if !strings.Contains(body, `name="query" required value="max(ui_cpu)"`) {
			t.Error("the editor lost what was typed")
		}
	})

	t.Run("preview draws the chart and saves nothing", func(t *testing.T) {
		status, body := preview(t, ruleForm(tok, "action", "preview"))
		if status != http.StatusOK {
			t.Fatalf("preview: %d\n%s", status, body)
		}
		for _, want := range []string{`<svg viewBox="0 0 720 240"`, `<polyline points="`, `stroke="#b3261e" stroke-dasharray="6 4"`, `stroke="#1e6b34" stroke-dasharray="2 3"`,
			`on &gt; 80 for 1s`, `off &lt; 60 for 1s`, `1 fired, 1 recovered, 2 transitions`, `<circle cx=`, `turn_on at 90`, `turn_off at 40`, `id="chart-from">The metric has data since`} {
			if !strings.Contains(body, want) {
				t.Errorf("the preview lacks %q", want)
			}
		}
		noInlineCode(t, body)
		if l, _ := c.Service.DB().Table("triggers").Rows(); l != nil {
			defer l.Close()
			if l.Next() {
				t.Fatal("a preview saved the rule")
			}
		}
	})

	t.Run("create, then the rule and the switch page show it", func(t *testing.T) {
		status, loc, body := cl.post("/ui/apps/checkout/triggers", ruleForm(tok))
		if status != http.StatusSeeOther || loc != "/ui/apps/checkout/triggers/cpu-high" {
			t.Fatalf("create: %d %s\n%s", status, loc, body)
		}
		_, body = cl.get(loc)
		for _, want := range []string{"Created auto-trigger checkout/cpu-high", "cpu-high", "when &gt; 80 for 1s", "when &lt; 60 for 1s", "Recent evaluations", `id="preview"`, "protect the cart"} {
			if !strings.Contains(body, want) {
				t.Errorf("the rule page lacks %q", want)
			}
		}
		noInlineCode(t, body)
		_, body = cl.get("/ui/apps/checkout/switches/recommend")
		if !strings.Contains(body, `id="switch-triggers" data-live`) || !strings.Contains(body, `href="/ui/apps/checkout/triggers/cpu-high"`) || !strings.Contains(body, "Pause the rule") {
			t.Fatalf("the switch page does not list the rule\n%s", body)
		}
	})

	t.Run("a staged rollout template is offered, saved and shown", func(t *testing.T) {
		if _, _, err := c.Service.CreateSwitch(ctx, admin, "checkout", server.SwitchInput{Name: "reviews", Level: wire.L3, Reason: "seed"}); err != nil {
			t.Fatal(err)
		}
		_, body := cl.get("/ui/apps/checkout/triggers/new?switch=reviews")
		if !strings.Contains(body, `<select name="rollout.template">`) || !strings.Contains(body, `1 % → 5 min → 50 % → 5 min → 100 %</option>`) {
			t.Fatalf("the editor offers no staged rollout\n%s", body)
		}
		status, _, body := cl.post("/ui/apps/checkout/triggers", ruleForm(tok, "name", "reviews-slow", "switch", "reviews", "rollout.percent", "5", "rollout.template", "canaries"))
		if status != http.StatusBadRequest || !strings.Contains(body, `<span class="ferr" role="alert">Staged rollout: give a percent or a template, not both</span>`) {
			t.Fatalf("percent and template: %d\n%s", status, body)
		}
		status, loc, body := cl.post("/ui/apps/checkout/triggers", ruleForm(tok, "name", "reviews-slow", "switch", "reviews", "rollout.template", "canaries"))
		if status != http.StatusSeeOther {
			t.Fatalf("create: %d\n%s", status, body)
		}
		if _, body = cl.get(loc); !strings.Contains(body, "through the staged rollout “canaries”") {
			t.Fatalf("the rule page does not say it stages the turn-on\n%s", body)
		}
	})

	t.Run("a person's change pauses it; the switch page says so and resumes it", func(t *testing.T) {
		olga := server.Actor{Name: "olga", Kind: audit.ActorUser, Role: server.RoleAdmin}
		if _, _, err := c.Service.TurnOn(ctx, olga, "checkout", "recommend", server.Toggle{Reason: "INC-7: I take it"}); err != nil {
			t.Fatal(err)
		}
		_, body := cl.get("/ui/apps/checkout/switches/recommend")
		if !strings.Contains(body, "PAUSED") || !strings.Contains(body, "Paused by olga") || !strings.Contains(body, "olga made switch.on on switch/checkout/recommend") {
			t.Fatalf("the switch page does not say the rule is paused\n%s", body)
		}
		status, loc, body := cl.post("/ui/apps/checkout/triggers/cpu-high/resume", url.Values{"_csrf": {tok}, "reason": {"resume: hand the switch back to the rule"}, "back": {"/ui/apps/checkout/switches/recommend"}})
		if status != http.StatusSeeOther || loc != "/ui/apps/checkout/switches/recommend" {
			t.Fatalf("resume: %d %s\n%s", status, loc, body)
		}
		v, err := c.Service.DB().WithContext(ctx).Table("trigger_states").Select("paused").Rows()
		if err != nil {
			t.Fatal(err)
		}
		defer v.Close()
		var paused bool
		for v.Next() {
			_ = v.Scan(&paused)
		}
		if paused {
			t.Fatal("still paused")
		}
		status, _, body = cl.post("/ui/apps/checkout/triggers/cpu-high/resume", url.Values{"_csrf": {tok}, "reason": {"again"}})
		if status != http.StatusConflict || !strings.Contains(body, "neither paused nor locked") {
			t.Fatalf("resuming a running rule: %d\n%s", status, body)
		}
	})

	t.Run("a dry run on a switch a person turned on does not claim to hold it", func(t *testing.T) {
		// recommend is on (olga, above) and the metric is at 40, below 80:
		// the rule starts from the switch as it is, on, and would turn it
		// off once recovered; it holds nothing.
		status, loc, body := cl.post("/ui/apps/checkout/triggers", ruleForm(tok, "name", "dry-watch", "mode", "dry_run"))
		if status != http.StatusSeeOther {
			t.Fatalf("create: %d\n%s", status, body)
		}
		_, body = cl.get(loc)
		if strings.Contains(body, "holds the switch on") || !strings.Contains(body, "counts the switch as on since") || !strings.Contains(body, "(dry run: it changes nothing; it would turn the switch off when &lt; 60 for 1s)") {
			t.Fatalf("the dry run's state line\n%s", body)
		}
	})

	t.Run("viewers read without forms", func(t *testing.T) {
		vpw := mustCreateUser(t, c, "vic", server.RoleViewer)
		vc := newClient(t, c)
		vc.signIn("vic", vpw)
		for _, p := range []string{"/ui/apps/checkout/triggers/cpu-high", "/ui/apps/checkout/switches/recommend"} {
			status, body := vc.get(p)
			if status != http.StatusOK || strings.Contains(body, `/triggers/cpu-high/`) || strings.Contains(body, `id="rule-form"`) {
				t.Fatalf("viewer on %s: %d, sees rule forms\n%s", p, status, body)
			}
		}
		if status, _ := vc.get("/ui/apps/checkout/triggers/new"); status != http.StatusForbidden {
			t.Fatalf("viewer's new rule page: %d", status)
		}
	})
}

// TestTriggerBrowser: in real Chromium, the rule's editor previews a
// draft: the chart is drawn with its threshold lines and a mark where it
// would have fired and recovered; the page breaks no CSP rule; and once
// the metric crosses, the switch page shows the rule holding it on.
func TestTriggerBrowser(t *testing.T) {
	root := browser(t)
	prom := promtest.Start(t)
	c := startTriggerConsole(t, prom)
	for _, v := range []float64{50, 90, 40} {
		prom.Exporter.Set("ui_cpu", v)
		for range 6 {
			prom.Sync(t)
		}
	}
	req, _ := http.NewRequest(http.MethodPost, c.URL()+"/api/v1/apps/checkout/triggers", strings.NewReader(`{"name":"cpu-high","switch":"recommend",
		"source":"prometheus","query":"max(ui_cpu)","trigger":{"op":">","threshold":80,"for":"1s"},"recover":{"op":"<","threshold":60,"for":"1s"},"cooldown":"0s","reason":"seed"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+bootstrapToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil || res.StatusCode != http.StatusCreated {
		t.Fatalf("create the rule: %v %v", res, err)
	}
	res.Body.Close()
	s := newSession(t, root, c)
	s.signIn("admin", bootstrapToken)
	s.do("preview the rule over the last minute",
		chromedp.Navigate(s.base+"/ui/apps/checkout/triggers/cpu-high"),
		chromedp.WaitVisible(chromedp.CSS(`#rule-form`)),
		chromedp.SetValue(chromedp.CSS(`#rule-form input[name=range]`), "1m"),
		chromedp.SetValue(chromedp.CSS(`#rule-form input[name="trigger.threshold"]`), "85"),
		chromedp.Click(chromedp.CSS(`#rule-form button[value=preview]`)),
		// The page had the saved rule's chart already: wait for the draft's.
		chromedp.WaitVisible(chromedp.CSS(`#preview[data-draft] svg polyline`)),
	)
	s.eval(`window.__csp = []; document.addEventListener("securitypolicyviolation", e => __csp.push(e.violatedDirective)); ""`)
	if n := s.eval(`String(document.querySelectorAll("[style]").length)`); n != "0" {
		t.Fatalf("%s elements carry inline styles, which the CSP refuses", n)
	}
	s.shot("preview")
	got := s.eval(`(() => {
		const svg = document.querySelector("#preview svg");
		const line = svg.querySelector("polyline").getBBox();
		const marks = svg.querySelectorAll("circle").length;
		const thresholds = [...svg.querySelectorAll("line[stroke-dasharray]")].map(l => l.getAttribute("y1")).join("/");
		return [Math.round(svg.getBoundingClientRect().width) > 300, line.width > 50, marks, thresholds !== "", document.querySelector("#preview figcaption").innerText.includes("1 fired, 1 recovered"), document.querySelector('#rule-form input[name="trigger.threshold"]').value].join(" ");
	})()`)
	if got != "true true 2 true true 85" {
		t.Fatalf("the chart (wide, line drawn, marks, thresholds, caption, the draft kept): %q\n%s", got, s.eval(`document.querySelector("#preview").innerText`))
	}
	s.do("hover a mark", chromedp.Click(chromedp.CSS(`#preview svg circle`)))
	if v := s.eval(`String(window.__csp.length)`); v != "0" {
		t.Fatalf("CSP violations: %s", s.eval(`window.__csp.join(",")`))
	}

	prom.Exporter.Set("ui_cpu", 95)
	s.do("open the switch page", chromedp.Navigate(s.base+"/ui/apps/checkout/switches/recommend"), chromedp.WaitVisible(chromedp.CSS(`#switch-triggers`)))
	wctx, cancel := context.WithTimeout(s.ctx, 15*time.Second)
	defer cancel()
	// The live region updates by itself when the rule turns the switch on.
	if _, err := chromedp.Run(wctx, chromedp.Poll[bool](`document.querySelector("#switch-triggers .state.on") !== null && document.querySelector("#switch-state").innerText.includes("ON")`,
		chromedp.WithPollingInterval(100*time.Millisecond))); err != nil {
		t.Fatalf("the switch page did not show the rule turning the switch on: %v\n%s", err, s.eval(`document.querySelector("main").innerText`))
	}
	s.shot("switch")
	t.Logf("switch page: %s", s.eval(`document.querySelector("#switch-triggers").innerText.replace(/\s+/g, " ")`))
}

// shot saves a screenshot of the page to look at, when
// SWITCHYARD_TRIGGER_SHOTS names a directory.
func (s *session) shot(name string) {
	dir := os.Getenv("SWITCHYARD_TRIGGER_SHOTS")
	if dir == "" {
		return
	}
	s.do("screenshot "+name, chromedp.EmulateViewport(1280, 1400), chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		png, err := chromedp.CaptureScreenshot()(ctx, tg)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, name+".png"), png, 0o600)
		}
		return err
	}))
}
