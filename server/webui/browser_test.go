package webui_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/switchyard-io/switchyard/sdk/wire"
	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/console"
)

// chromiumPath finds Debian's chromium. Without it the browser tests fail
// in CI (CI=true) and are skipped elsewhere.
func chromiumPath(t testing.TB) string {
	for _, p := range []string{os.Getenv("SWITCHYARD_CHROMIUM"), "/usr/bin/chromium", "chromium", "chromium-browser"} {
		if p == "" {
			continue
		}
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("browser tests need Chromium: apt-get install -y chromium (or set SWITCHYARD_CHROMIUM)")
	}
	t.Skip("chromium not installed; browser tests skipped outside CI")
	return ""
}

// browser starts one headless Chromium for the test and returns a context
// whose tabs share it. Sessions get their own browser contexts (cookies).
func browser(t testing.TB) context.Context {
	path := chromiumPath(t)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true), chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 800),
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	root, cancelRoot := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancelRoot(); cancelAlloc() })
	if err := chromedp.Do(root, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return root
}

// session is one signed-in person in their own browser context.
type session struct {
	t      testing.TB
	ctx    context.Context
	base   string
	clicks int
	// retries counts the steps do ran again after a live refresh.
	retries int
}

func newSession(t testing.TB, root context.Context, c *console.Console) *session {
	ctx, cancel := chromedp.NewContext(root, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	// The first run opens the tab; it must not carry a timeout.
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("open a browser context: %v", err)
	}
	return &session{t: t, ctx: ctx, base: c.URL()}
}

// stepsTimeout bounds one call of do. It is generous: a passing run takes
// well under a second per call, and a CI machine compiling other packages
// under the race detector can be ten times slower than a quiet one.
const stepsTimeout = 30 * time.Second

// do runs steps with a timeout and fails the test on error. A live refresh
// may swap a region between finding a node and using it ("Could not find node
// with given id"); the step that met the stale node is then tried again on the
// fresh DOM, at most twice per call. Steps that already succeeded are never
// run again, as a person does not click or type twice because the page
// moved, so a retry changes neither the page nor the click count. Each retry
// is logged with the step's name, so a slow live refresh shows in the log
// rather than as a flake.
func (s *session) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(s.ctx, stepsTimeout)
	defer cancel()
	retries := 0
	for i := 0; i < len(steps); {
		err := chromedp.Do(ctx, steps[i])
		if err == nil {
			i++
			continue
		}
		if !isStaleNode(err) || retries == 2 {
			s.t.Fatalf("%s: step %d of %d: %v", what, i+1, len(steps), err)
		}
		retries++
		s.retries++
		s.t.Logf("browser retry: %s: step %d of %d met a node a live refresh replaced; trying it again (retry %d)", what, i+1, len(steps), retries)
		select {
		case <-ctx.Done():
			s.t.Fatalf("%s: step %d of %d: %v", what, i+1, len(steps), ctx.Err())
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// isStaleNode tells whether err is Chromium's answer for a node id that a
// DOM update has invalidated.
func isStaleNode(err error) bool {
	return strings.Contains(err.Error(), "Could not find node with given id")
}

// click is a counted mouse click. It counts only a click that happened: a
// click that failed (its node went stale before the mouse event) is not
// counted, and do never repeats a click that succeeded.
func (s *session) click(sel string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		if _, err := chromedp.Click(chromedp.CSS(sel))(ctx, t); err != nil {
			return err
		}
		s.clicks++
		return nil
	})
}

func (s *session) eval(expr string) string {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		s.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

func (s *session) signIn(user, pw string) {
	s.t.Helper()
	s.do("sign in as "+user,
		chromedp.Navigate(s.base+"/ui/login"),
		chromedp.SendKeys(chromedp.CSS("#username"), user),
		chromedp.SendKeys(chromedp.CSS("#password"), pw),
		chromedp.Click(chromedp.CSS(`button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`#live-status`)),
	)
}

// TestBrowser drives the console in real headless Chromium: sign in,
// create a switch, turn it on at 25 %, see it on the Overview and, live, in
// a second session; roll it back from the history; a viewer sees no
// controls; and the 3-click path to 100 %.
func TestBrowser(t *testing.T) {
	root := browser(t)
	c := startConsole(t)
	ctx := context.Background()
	op := newSession(t, root, c)
	viewer := newSession(t, root, c)
	// Every subtest starts signed in, so each one can run alone
	// (-run 'TestBrowser/three_clicks').
	op.signIn("admin", bootstrapToken) // the first sign-in creates the admin user

	t.Run("create a switch", func(t *testing.T) {
		op.t = t
		op.do("create switch",
			chromedp.Navigate(op.base+"/ui/switches/new"),
			chromedp.SendKeys(chromedp.CSS(`#new-switch input[name=app]`), "checkout"),
			chromedp.SendKeys(chromedp.CSS(`#new-switch input[name=name]`), "recommend"),
			chromedp.SendKeys(chromedp.CSS(`#new-switch textarea[name=description]`), "Personalised recommendations on the cart page"),
			chromedp.SendKeys(chromedp.CSS(`#new-switch input[name=owner]`), "team-growth"),
			chromedp.SendKeys(chromedp.CSS(`#new-switch input[name=reason]`), "new switch for the recommender"),
			chromedp.Click(chromedp.CSS(`#new-switch button[type=submit]`)),
			chromedp.WaitVisible(chromedp.CSS(`#turn-on`)),
		)
		if _, err := c.Service.GetSwitch(ctx, "checkout", "recommend"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("viewer watches the overview", func(t *testing.T) {
		viewer.t = t
		vpw := mustCreateUser(t, c, "vera", server.RoleViewer)
		viewer.signIn("vera", vpw)
		viewer.eval(`window.__noReload = "still here"; ""`)
		if got := viewer.eval(`document.querySelector("main").innerText`); !strings.Contains(got, "Nothing is degraded") {
			t.Fatalf("overview before: %q", got)
		}
	})

	t.Run("turn on at 25% and see it live elsewhere", func(t *testing.T) {
		op.t, viewer.t = t, t
		seen := make(chan time.Duration, 1)
		start := time.Now()
		go func() {
			wctx, cancel := context.WithTimeout(viewer.ctx, 10*time.Second)
			defer cancel()
			_, err := chromedp.Run(wctx, chromedp.Poll[bool](`document.getElementById("on-checkout-recommend") !== null`, chromedp.WithPollingInterval(20*time.Millisecond)))
			if err == nil {
				seen <- time.Since(start)
			}
			close(seen)
		}()
		op.do("turn on at 25%",
			chromedp.SendKeys(chromedp.CSS(`#on-reason`), "INC-42 recommender slow"),
			chromedp.SetValue(chromedp.CSS(`#turn-on input[name=percent]`), "25"),
			chromedp.Click(chromedp.CSS(`#turn-on button[type=submit]`)),
			chromedp.WaitVisible(chromedp.CSS(`.flash`)),
		)
		committed := time.Since(start)
		d, ok := <-seen
		if !ok {
			t.Fatal("the viewer's overview did not show the switch without a reload")
		}
		t.Logf("operator's change committed after %v; the other session showed it after %v", committed, d)
		if d-committed > time.Second {
			t.Errorf("live update took %v after the commit, want ≤ 1s", d-committed)
		}
		if viewer.eval(`window.__noReload || ""`) != "still here" {
			t.Error("the viewer's page was reloaded")
		}
		row := viewer.eval(`document.getElementById("on-checkout-recommend").innerText`)
		for _, want := range []string{"recommend", "L3", "25 %", "admin", "INC-42 recommender slow"} {
			if !strings.Contains(row, want) {
				t.Errorf("overview row %q lacks %q", row, want)
			}
		}
		op.do("operator's overview", chromedp.Navigate(op.base+"/ui/"), chromedp.WaitVisible(chromedp.CSS(`#on-checkout-recommend`)))
	})

	t.Run("instances page follows the fleet", func(t *testing.T) {
		viewer.t = t
		viewer.do("open the instances", chromedp.Navigate(viewer.base+"/ui/instances"), chromedp.WaitVisible(chromedp.CSS(`#instances`)))
		viewer.eval(`window.__noReload = "still here"; ""`)
		// Two reports, 10 s apart in report time: 50 answers in the 5 s
		// since start, then 200 more in 10 s. A change announced before the
		// first (the audit log's, of the subtest before) may refresh the
		// page once; only the stream's fleet events show the second.
		base := time.Now().UTC().Add(-20 * time.Second)
		for _, r := range []struct {
			at       time.Time
			degraded uint64
			want     string
		}{{base, 50, "10/s"}, {base.Add(10 * time.Second), 250, "20/s"}} {
			put := time.Now()
			putInstance(t, c, wire.Instance{App: "checkout", InstanceID: "pod-live", SDKVersion: "v1.0.0", StartedAt: base.Add(-5 * time.Second), ReportInterval: wire.Duration(10 * time.Second),
				Report: &wire.Report{At: r.at.Unix(), Switches: map[string]wire.SwitchSignal{"recommend": {Degraded: r.degraded, LastRead: r.at.Unix()}}}})
			viewer.do("the report shows", chromedp.Poll[chromedp.Void](`(() => { const r = document.getElementById("inst-checkout-pod-live"); return r !== null && r.innerText.includes("`+r.want+`") })()`,
				chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(5*time.Second)))
			t.Logf("a report of %s showed on the Instances page after %v", r.want, time.Since(put))
		}
		if viewer.eval(`window.__noReload || ""`) != "still here" {
			t.Error("the instances page was reloaded")
		}
	})

	t.Run("viewer sees no controls", func(t *testing.T) {
		viewer.t = t
		for _, p := range []string{"/ui/", "/ui/switches", "/ui/apps/checkout/switches/recommend", "/ui/limits"} {
			viewer.do("open "+p, chromedp.Navigate(viewer.base+p), chromedp.WaitVisible(chromedp.CSS(`main`)))
			n := viewer.eval(`String(document.querySelectorAll('form[method=post]:not([action="/ui/logout"]), details.quick, details.rollback, a[href$="/new"]').length)`)
			if n != "0" {
				t.Errorf("viewer sees %s controls on %s", n, p)
			}
		}
	})

	t.Run("roll back from the history", func(t *testing.T) {
		op.t = t
		op.do("open the switch", chromedp.Navigate(op.base+"/ui/apps/checkout/switches/recommend"), chromedp.WaitVisible(chromedp.CSS(`ol.history`)))
		// The oldest event is the creation: the switch was off.
		op.do("roll back to the creation",
			chromedp.Click(chromedp.CSS(`ol.history > li:last-child details.rollback summary`)),
			chromedp.SendKeys(chromedp.CSS(`ol.history > li:last-child details.rollback input[name=reason]`), "recommender recovered"),
			chromedp.Click(chromedp.CSS(`ol.history > li:last-child details.rollback button[type=submit]`)),
			chromedp.WaitVisible(chromedp.CSS(`.flash`)),
		)
		sw, _ := c.Service.GetSwitch(ctx, "checkout", "recommend")
		if sw.State != wire.StateOff {
			t.Errorf("after rollback the switch is %s", sw.State)
		}
		if top := op.eval(`document.querySelector("ol.history > li").innerText`); !strings.Contains(top, "switch.rollback") || !strings.Contains(top, "recommender recovered") {
			t.Errorf("newest history entry: %q", top)
		}
	})

	t.Run("keyboard focus is visible and layouts fit", func(t *testing.T) {
		op.t = t
		op.do("open the switch list", chromedp.Navigate(op.base+"/ui/switches"), chromedp.WaitVisible(chromedp.CSS(`main`)))
		op.do("tab", chromedp.KeyEvent("\t"))
		if got := op.eval(`document.activeElement.className + "|" + getComputedStyle(document.activeElement).outlineStyle`); got != "skip|solid" {
			t.Errorf("first Tab focuses %q, want the skip link with a solid outline", got)
		}
		// Every control of the page is reachable with Tab.
		n := op.eval(`String([...document.querySelectorAll("main button, main input:not([type=hidden]), main select, main summary, main a")].filter(e => e.tabIndex < 0).length)`)
		if n != "0" {
			t.Errorf("%s controls are out of the tab order", n)
		}

		if _, _, err := c.Service.CreateLimit(ctx, admin, "checkout", server.LimitInput{LimitRule: wire.LimitRule{Resource: "POST /orders", Kind: wire.KindTokenBucket, Rate: 200, Burst: 50}, Reason: "seed"}); err != nil {
			t.Fatal(err)
		}
		inst, _ := json.Marshal(wire.Instance{App: "checkout", InstanceID: "checkout-1", SDKVersion: "v0.9.0", Labels: map[string]string{"zone": "a"}})
		if _, err := c.Etcd.Put(ctx, wire.InstanceKey(c.Config.Namespace, "checkout", "checkout-1"), string(inst)); err != nil {
			t.Fatal(err)
		}
		editor := op.base + "/ui/limits/edit?app=checkout&resource=POST+%2Forders"
		// fits: the selected choice of "Key by" is not cut off.
		const fits = `(() => { const s = document.querySelector('select[name="key_by.source"]'), m = document.createElement("span");
			m.style.font = getComputedStyle(s).font; m.style.whiteSpace = "nowrap"; m.textContent = s.options[s.selectedIndex].text;
			document.body.append(m); const need = m.getBoundingClientRect().width + 36; m.remove();
			return String(need <= s.getBoundingClientRect().width) })()`
		const keyParams = `[...document.querySelectorAll("[data-keyby]")].map(e => e.hidden ? "-" : e.querySelector("input").name).join(" ")`
		for _, vp := range [][2]int64{{1280, 800}, {390, 844}} {
			op.do("limit editor", chromedp.EmulateViewport(vp[0], vp[1]), chromedp.Navigate(editor), chromedp.WaitVisible(chromedp.CSS(`select[name="key_by.source"]`)))
			if op.eval(fits) != "true" {
				t.Errorf("at %d px the Key by choice %q is cut off", vp[0], op.eval(`document.querySelector('select[name="key_by.source"]').selectedOptions[0].text`))
			}
			if got := op.eval(keyParams); got != "- - -" {
				t.Errorf("at %d px, keyed by nothing, the key parameters show: %q", vp[0], got)
			}
			if w := op.eval(`String(document.documentElement.scrollWidth)`); w != strconv.FormatInt(vp[0], 10) {
				t.Errorf("the limit editor at %d px is %s px wide", vp[0], w)
			}
		}
		op.do("key by a header", chromedp.SetValue(chromedp.CSS(`select[name="key_by.source"]`), "header"),
			chromedp.Evaluate[chromedp.Void](`document.querySelector('select[name="key_by.source"]').dispatchEvent(new Event("change", {bubbles: true}))`))
		if got := op.eval(keyParams); got != "key_by.name key_by.max_keys key_by.ttl" {
			t.Errorf("keyed by a header, the key parameters are %q", got)
		}

		// Phone cards say what each value is.
		for path, label := range map[string]string{"/ui/limits": "Kind", "/ui/instances": "SDK", "/ui/": "Kind"} {
			op.do("phone "+path, chromedp.Navigate(op.base+path), chromedp.WaitVisible(chromedp.CSS(`main`)))
			if w := op.eval(`String(document.documentElement.scrollWidth)`); w != "390" {
				t.Errorf("%s at 390 px is %s px wide", path, w)
			}
			got := op.eval(`(() => { const td = document.querySelector('main td[data-label="` + label + `"]'); return td ? getComputedStyle(td, "::before").content : "no cell" })()`)
			if !strings.Contains(got, label) {
				t.Errorf("the phone card of %s labels its %s cell %s", path, label, got)
			}
		}
		op.do("desktop width", chromedp.EmulateViewport(1280, 800))
	})

	t.Run("three clicks to 100 percent", func(t *testing.T) {
		op.t = t
		for _, name := range []string{"ads", "banners"} {
			if _, _, err := c.Service.CreateSwitch(ctx, admin, "search", server.SwitchInput{Name: name, Level: wire.L4, Reason: "seed"}); err != nil {
				t.Fatal(err)
			}
		}
		check := func(name, reason string) {
			t.Helper()
			sw, _ := c.Service.GetSwitch(ctx, "search", name)
			if sw.State != wire.StateOn || sw.Rollout().Percent != 100 || sw.Reason != reason {
				t.Errorf("%s after the 3-click path: %s at %v%% (%q)", name, sw.State, sw.Rollout().Percent, sw.Reason)
			}
			if op.clicks > 3 {
				t.Errorf("%s took %d clicks, want ≤ 3", name, op.clicks)
			}
			t.Logf("%s on at 100 %% in %d clicks plus typing (%d retried steps in this session so far)", name, op.clicks, op.retries)
		}

		// From the switch list: Turn on… on the row, the reason, Turn on,
		// Confirm.
		op.do("open the switch list", chromedp.Navigate(op.base+"/ui/switches?app=search"), chromedp.WaitVisible(chromedp.CSS(`#quick-search-banners`)))
		op.clicks = 0
		op.do("click 1: Turn on…", op.click(`#quick-search-banners summary`))
		op.do("the reason field has the focus", chromedp.Poll[chromedp.Void](`document.activeElement && document.activeElement.name === "reason"`, chromedp.WithPollingTimeout(3*time.Second)))
		op.do("type the reason", chromedp.KeyEvent("INC-78 banner CDN down"))
		op.do("click 2: Turn on", op.click(`#quick-search-banners button.primary`), chromedp.WaitVisible(chromedp.CSS(`#confirm`)))
		gap, _ := strconv.ParseFloat(op.eval(`(() => { const a = document.getElementById("confirm").getBoundingClientRect(), b = document.querySelector("#confirm ~ a").getBoundingClientRect();
			return String(Math.max(b.left - a.right, b.top - a.bottom)) })()`), 64)
		if gap < 8 {
			t.Errorf("Confirm and Cancel are %.0f px apart, want ≥ 8", gap)
		}
		op.do("click 3: Confirm", op.click(`#confirm`), chromedp.WaitVisible(chromedp.CSS(`.flash`)))
		check("banners", "INC-78 banner CDN down")

		// From the Overview, as the README says: open the form, type the
		// switch and the reason, Turn on, Confirm.
		op.do("open the overview", chromedp.Navigate(op.base+"/ui/"), chromedp.WaitVisible(chromedp.CSS(`#quick-on summary`)))
		op.clicks = 0
		op.do("click 1: Turn a switch on…", op.click(`#quick-on summary`))
		op.do("the switch field has the focus", chromedp.Poll[chromedp.Void](`document.activeElement && document.activeElement.name === "switch"`, chromedp.WithPollingTimeout(3*time.Second)))
		op.do("type the switch, Tab, the reason", chromedp.KeyEvent("search/ads"), chromedp.KeyEvent("\t"), chromedp.KeyEvent("INC-77 ad server down"))
		op.do("click 2: Turn on", op.click(`#quick-on-form button.primary`), chromedp.WaitVisible(chromedp.CSS(`#confirm`)))
		if txt := op.eval(`document.querySelector("main").innerText`); !strings.Contains(txt, "every write of the service will fail") || !strings.Contains(txt, "everyone") {
			t.Errorf("confirmation does not explain L4 at 100 %%: %q", txt)
		}
		op.do("click 3: Confirm", op.click(`#confirm`), chromedp.WaitVisible(chromedp.CSS(`.flash`)))
		check("ads", "INC-77 ad server down")
		if path := op.eval(`location.pathname`); path != "/ui/" {
			t.Errorf("after the Overview's turn-on the browser is at %s", path)
		}
	})
}

// restartingLB is a load balancer in front of the console that can drop the
// open event streams and answer the next few with 502, as while a console
// replica restarts.
type restartingLB struct {
	proxy *httputil.ReverseProxy

	mu      sync.Mutex
	fail    int
	streams []context.CancelFunc
}

func (lb *restartingLB) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/ui/events" {
		lb.proxy.ServeHTTP(w, r)
		return
	}
	lb.mu.Lock()
	if lb.fail > 0 {
		lb.fail--
		lb.mu.Unlock()
		http.Error(w, "console restarting", http.StatusBadGateway)
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	lb.streams = append(lb.streams, cancel)
	lb.mu.Unlock()
	lb.proxy.ServeHTTP(w, r.WithContext(ctx))
}

// restart drops every open event stream and fails the next n with 502.
func (lb *restartingLB) restart(n int) {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	lb.fail = n
	for _, cancel := range lb.streams {
		cancel()
	}
	lb.streams = nil
}

// TestBrowserLiveAfterOutage: when the event stream's reconnect meets an
// error status, the page opens a new stream and catches up with what
// changed meanwhile instead of going quiet for good.
func TestBrowserLiveAfterOutage(t *testing.T) {
	root := browser(t)
	c := startConsole(t)
	ctx := context.Background()
	target, _ := url.Parse(c.URL())
	lb := &restartingLB{proxy: httputil.NewSingleHostReverseProxy(target)}
	front := httptest.NewServer(lb)
	t.Cleanup(front.Close)
	for _, name := range []string{"during", "after"} {
		if _, _, err := c.Service.CreateSwitch(ctx, admin, "checkout", server.SwitchInput{Name: name, Level: wire.L3, Reason: "seed"}); err != nil {
			t.Fatal(err)
		}
	}
	s := newSession(t, root, c)
	s.base = front.URL
	s.signIn("admin", bootstrapToken)
	live := chromedp.Poll[chromedp.Void](`document.getElementById("live-status").textContent === "● live"`)
	s.do("the stream is open", live)
	s.eval(`window.__noReload = "still here"; ""`)

	lb.restart(2)
	s.do("the page notices the outage", chromedp.Poll[chromedp.Void](`document.getElementById("live-status").textContent !== "● live"`))
	if _, _, err := c.Service.TurnOn(ctx, admin, "checkout", "during", server.Toggle{Reason: "while the stream was down"}); err != nil {
		t.Fatal(err)
	}
	s.do("the change made during the outage shows", live, chromedp.Poll[chromedp.Void](`document.getElementById("on-checkout-during") !== null`))

	if _, _, err := c.Service.TurnOn(ctx, admin, "checkout", "after", server.Toggle{Reason: "after the outage"}); err != nil {
		t.Fatal(err)
	}
	s.do("a later change shows live", chromedp.Poll[chromedp.Void](`document.getElementById("on-checkout-after") !== null`))
	if s.eval(`window.__noReload || ""`) != "still here" {
		t.Error("the page was reloaded")
	}
}
