package webui_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/switchyard-io/switchyard/internal/etcdtest"
	"github.com/switchyard-io/switchyard/internal/pgtest"
	"github.com/switchyard-io/switchyard/internal/servertest"
	"github.com/switchyard-io/switchyard/sdk"
	"github.com/switchyard-io/switchyard/sdk/wire"
	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/console"
	"github.com/switchyard-io/switchyard/server/rollout"
	"github.com/switchyard-io/switchyard/server/webui"
)

// rolloutConsole is a console (real Postgres, real etcd) whose clock the
// test moves, with count SDK instances of checkout watching it. A
// plan's holds pass when the test advances the clock.
type rolloutConsole struct {
	*console.Console
	offset atomic.Int64
}

func (rc *rolloutConsole) now() time.Time          { return time.Now().Add(time.Duration(rc.offset.Load())) }
func (rc *rolloutConsole) advance(d time.Duration) { rc.offset.Add(int64(d)) }

func startRolloutConsole(t *testing.T, instances ...string) *rolloutConsole {
	t.Helper()
	rc := &rolloutConsole{}
	etcd := etcdtest.Start(t)
	cfg := console.DefaultConfig()
	cfg.Listen, cfg.DataDir, cfg.DatabaseURL = "127.0.0.1:0", t.TempDir(), pgtest.NewDatabase(t)
	cfg.EtcdEndpoints, cfg.BootstrapToken = []string{etcd.Endpoint}, bootstrapToken
	c, err := console.Start(context.Background(), cfg, nil, console.WithWebUI(webui.Options{Clock: fastClock{}}), console.WithClock(rc.now))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Shutdown(ctx)
	})
	rc.Console = c
	if _, _, err := c.Service.CreateSwitch(context.Background(), admin, "checkout", server.SwitchInput{Name: "recommend", Level: wire.L3, Reason: "seed"}); err != nil {
		t.Fatal(err)
	}
	for _, id := range instances {
		cl, err := sdk.New(context.Background(), sdk.Config{Endpoints: []string{etcd.Endpoint}, App: "checkout", InstanceID: id, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cl.Close() })
	}
	servertest.Eventually(t, 15*time.Second, fmt.Sprintf("the fleet model sees the %d instances", len(instances)), func() bool {
		_, n := c.Fleet.AppliedBy("checkout", 0, nil)
		return n == len(instances)
	})
	return rc
}

var planLink = regexp.MustCompile(`^/ui/apps/checkout/rollouts/(\d+)$`)

// TestRolloutPages drives the rollout pages without JavaScript: the switch
// page offers the templates and names the instances each step reaches, a
// bad condition is shown next to its field with what was typed, a good
// form starts the plan and lands on its timeline, the plan is paused and
// aborted with reasons, and a viewer sees no controls.
func TestRolloutPages(t *testing.T) {
	rc := startRolloutConsole(t, "web-1", "web-2")
	op := newClient(t, rc.Console)
	op.signIn("admin", bootstrapToken)
	sw := "/ui/apps/checkout/switches/recommend"

	status, body := op.get(sw)
	if status != http.StatusOK || !strings.Contains(body, "Staged rollout…") {
		t.Fatalf("switch page %d: no staged rollout section", status)
	}
	first := "web-1"
	if wire.Bucket("checkout", "recommend", "web-2") < wire.Bucket("checkout", "recommend", "web-1") {
		first = "web-2"
	}
	for _, want := range []string{"1 % → 5 min → 50 % → 5 min → 100 %", "so that " + first + " is in",
		"reaches 1 of 2 live instances <small>(" + first + ")</small>", "reaches 2 of 2 live instances <small>(web-1, web-2)</small>",
		`value="default/off" disabled><span>50 % → 5 min → off`, "the switch is off"} {
		if !strings.Contains(body, want) {
			t.Errorf("the switch page lacks %q", want)
		}
	}
	tok := csrfRe.FindStringSubmatch(body)[1]
	form := url.Values{"_csrf": {tok}, "template": {"default/on"}, "reason": {"INC-5 stage it"}, "source": {"fleet"},
		"query": {`degraded_p99{switch="recommend"}`}, "op": {"<"}, "threshold": {"0.02"}, "on_no_data": {"pause"}, "on_failure": {"revert"}}
	status, _, body = op.post(sw+"/rollouts", form)
	if status != http.StatusBadRequest || !strings.Contains(body, "Query: unknown fleet metric") || !strings.Contains(body, `value="degraded_p99{switch=&#34;recommend&#34;}"`) {
		t.Fatalf("bad query: %d\n%s", status, body)
	}
	var plans int64
	if err := rc.DB.Table("rollouts").Count(&plans).Error; err != nil || plans != 0 {
		t.Fatalf("a refused form stored %d plans (%v)", plans, err)
	}
	form.Set("query", `degraded_p99_seconds{switch="recommend"}`)
	status, loc, _ := op.post(sw+"/rollouts", form)
	m := planLink.FindStringSubmatch(loc)
	if status != http.StatusSeeOther || m == nil {
		t.Fatalf("start: %d %q", status, loc)
	}
	status, body = op.get(loc)
	if status != http.StatusOK || !strings.Contains(body, "Staged rollout #"+m[1]) || !strings.Contains(body, `id="step-3"`) {
		t.Fatalf("plan page %d\n%s", status, body)
	}
	for _, want := range []string{"1 % → 5m → 50 % → 5m → 100 %", "Reason to pause", "Reason to abort"} {
		if !strings.Contains(body, want) {
			t.Errorf("the plan page lacks %q", want)
		}
	}
	tok = csrfRe.FindStringSubmatch(body)[1]
	status, _, body = op.post(loc+"/pause", url.Values{"_csrf": {tok}})
	if status != http.StatusBadRequest || !strings.Contains(body, "Reason: is required") {
		t.Fatalf("pause without a reason: %d", status)
	}
	status, _, body = op.post(loc+"/pause", url.Values{"_csrf": {tok}, "reason": {"hold on"}})
	if status != http.StatusSeeOther {
		t.Fatalf("pause: %d %s", status, body)
	}
	_, body = op.get(sw)
	if !strings.Contains(body, "is <strong>paused</strong>") || !strings.Contains(body, "paused by admin: hold on") {
		t.Fatalf("the switch page does not say the plan is paused")
	}
	status, _, _ = op.post(loc+"/abort", url.Values{"_csrf": {tok}, "reason": {"not today"}})
	if status != http.StatusSeeOther {
		t.Fatalf("abort: %d", status)
	}
	_, body = op.get(loc)
	if !strings.Contains(body, `id="rollout-state">aborted`) || strings.Contains(body, "Reason to abort") {
		t.Fatalf("after abort the page still offers controls or hides the state")
	}

	vpw := mustCreateUser(t, rc.Console, "vera", server.RoleViewer)
	viewer := newClient(t, rc.Console)
	viewer.signIn("vera", vpw)
	for _, p := range []string{sw, loc} {
		if _, body := viewer.get(p); strings.Contains(body, "Staged rollout…") || strings.Contains(body, `action="`+loc) {
			t.Errorf("a viewer sees rollout controls on %s", p)
		}
	}
}

// TestBrowserRollout: in real Chromium, start the default plan from the
// switch page and watch it advance — each step's row fills in live as
// the fleet applies it and the console's clock passes its hold — to done,
// without a reload.
func TestBrowserRollout(t *testing.T) {
	root := browser(t)
	rc := startRolloutConsole(t, "web-1", "web-2", "web-3")
	op := newSession(t, root, rc.Console)
	op.signIn("admin", bootstrapToken)
	op.do("open the switch and start the default plan",
		chromedp.Navigate(op.base+"/ui/apps/checkout/switches/recommend"),
		chromedp.Click(chromedp.CSS(`#staged-rollout summary`)),
		chromedp.SendKeys(chromedp.CSS(`#rollout-reason`), "INC-12 stage the fallback"),
		chromedp.Click(chromedp.CSS(`#rollout-form button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`#rollout-timeline`)),
	)
	op.eval(`window.__noReload = "still here"; ""`)
	status := func(n int) string {
		return op.eval(fmt.Sprintf(`(document.getElementById("step-%d") || {dataset: {}}).dataset.status || ""`, n))
	}
	waitFor := func(what, js string) {
		t.Helper()
		op.do(what, chromedp.Poll[chromedp.Void](js, chromedp.WithPollingTimeout(20*time.Second), chromedp.WithPollingInterval(50*time.Millisecond)))
	}
	start := time.Now()
	waitFor("step 1 holds", `document.getElementById("step-1").dataset.status === "holding"`)
	row := op.eval(`document.getElementById("step-1").innerText`)
	t.Logf("step 1 holding after %v: %q", time.Since(start).Round(time.Millisecond), strings.Join(strings.Fields(row), " "))
	if !strings.Contains(row, "applied 1/1") || !strings.Contains(row, "left") || !strings.Contains(row, "is in") {
		t.Errorf("step 1 row %q: want applied 1/1, the time left and the instance it reaches", row)
	}
	for n, want := range map[int]string{2: "to come", 3: "to come"} {
		if got := status(n); got != want {
			t.Errorf("step %d is %q, want %q", n, got, want)
		}
	}

	rc.advance(5 * time.Minute)
	moved := time.Now()
	waitFor("step 2 holds", `document.getElementById("step-2").dataset.status === "holding"`)
	t.Logf("step 2 holding %v after the clock passed step 1's hold", time.Since(moved).Round(time.Millisecond))
	if got := status(1); got != rollout.OutcomePassed {
		t.Errorf("step 1 is %q, want passed", got)
	}
	rc.advance(5 * time.Minute)
	waitFor("the plan is done", `document.getElementById("rollout-state").textContent === "done"`)
	if got := op.eval(`document.getElementById("step-3").innerText`); !strings.Contains(got, "applied 3/3") {
		t.Errorf("step 3 row %q", got)
	}
	if op.eval(`window.__noReload || ""`) != "still here" {
		t.Error("the page was reloaded")
	}
	sw, _ := rc.Service.GetSwitch(context.Background(), "checkout", "recommend")
	if sw.State != wire.StateOn || sw.Rollout().Percent != 100 {
		t.Errorf("after the plan the switch is %s at %v %%", sw.State, sw.Rollout().Percent)
	}
}
