package webui_test

import (
	"bufio"
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/sdk/wire"
	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/console"
	"github.com/switchyard-io/switchyard/server/webui"
)

// TestIncidentEdges covers what operators meet during an incident: races on
// the same switch, typos in editors, names with dashes. Every failed change
// must say why where the operator looks.
func TestIncidentEdges(t *testing.T) {
	c := startConsole(t)
	ctx := context.Background()
	newClient(t, c).signIn("admin", bootstrapToken)
	cl := newClient(t, c)
	cl.signIn("admin", bootstrapToken)
	mk := func(app, name string, on bool) *server.Switch {
		t.Helper()
		sw, _, err := c.Service.CreateSwitch(ctx, admin, app, server.SwitchInput{Name: name, Level: wire.L3, Reason: "seed"})
		if err != nil {
			t.Fatal(err)
		}
		if on {
			if sw, _, err = c.Service.TurnOn(ctx, admin, app, name, server.Toggle{Reason: "seed"}); err != nil {
				t.Fatal(err)
			}
		}
		return sw
	}
	const conflict = "Someone else changed this meanwhile"

	t.Run("a second turn-off of the same switch says why", func(t *testing.T) {
		sw := mk("checkout", "race", true)
		path := "/ui/apps/checkout/switches/race/off"
		v := strconv.FormatInt(sw.Version, 10)
		for _, back := range []string{"/ui/", "/ui/switches"} {
			if back == "/ui/switches" {
				sw, _, _ = c.Service.TurnOn(ctx, admin, "checkout", "race", server.Toggle{Reason: "again"})
				v = strconv.FormatInt(sw.Version, 10)
			}
			form := url.Values{"_csrf": {cl.csrf("/ui/")}, "reason": {"first"}, "version": {v}, "back": {back}}
			if status, _, body := cl.post(path, form); status != http.StatusSeeOther {
				t.Fatalf("first turn-off: %d\n%s", status, body)
			}
			form.Set("reason", "second")
			status, _, body := cl.post(path, form)
			if status != http.StatusConflict || !strings.Contains(body, conflict) {
				t.Errorf("second turn-off from %s: %d, the conflict is not shown\n%s", back, status, body)
			}
		}
	})

	t.Run("a failed delete is shown in an open editor", func(t *testing.T) {
		mk("checkout", "doomed", false)
		status, _, body := cl.post("/ui/apps/checkout/switches/doomed/delete", url.Values{"_csrf": {cl.csrf("/ui/")}, "reason": {"cleanup"}, "version": {"999"}})
		if status != http.StatusConflict {
			t.Fatalf("delete at a stale version: %d", status)
		}
		if !regexp.MustCompile(`(?s)<details class="card" open>.*` + conflict).MatchString(body) {
			t.Errorf("the delete error is hidden in a closed section\n%s", body)
		}
	})

	t.Run("a typo in a rule's editor keeps editing that rule", func(t *testing.T) {
		rule := wire.LimitRule{Resource: "GET /products/{id}", Kind: wire.KindTokenBucket, Rate: 10, Burst: 5, Mode: wire.ModeEnforce, Scope: wire.ScopeInstance}
		r, _, err := c.Service.CreateLimit(ctx, admin, "shop.web", server.LimitInput{LimitRule: rule, Reason: "seed"})
		if err != nil {
			t.Fatal(err)
		}
		status, _, body := cl.post("/ui/limits/save", url.Values{
			"_csrf": {cl.csrf("/ui/")}, "app": {"shop.web"}, "resource": {rule.Resource}, "version": {strconv.FormatInt(r.Version, 10)},
			"kind": {"token_bucket"}, "token_bucket.rate": {"ten"}, "token_bucket.burst": {"5"}, "mode": {"enforce"}, "scope": {"instance"}, "reason": {"r"},
		})
		if status != http.StatusBadRequest || !strings.Contains(body, "must be a number") {
			t.Fatalf("bad rate: %d\n%s", status, body)
		}
		if !strings.Contains(body, `name="version" value="`+strconv.FormatInt(r.Version, 10)+`"`) || !strings.Contains(body, "Save rule") {
			t.Errorf("after a typo the editor turned into a create form\n%s", body)
		}
	})

	t.Run("changes that leave a switch on at L4, L5 or 100 % ask first", func(t *testing.T) {
		sw := mk("checkout", "careful", true)
		path := "/ui/apps/checkout/switches/careful"
		edit := url.Values{"_csrf": {cl.csrf("/ui/")}, "level": {"L4"}, "max_on": {"24h"}, "expiry_policy": {"remind"}, "reason": {"writes corrupt data"}, "version": {strconv.FormatInt(sw.Version, 10)}}
		status, _, body := cl.post(path+"/edit", edit)
		if status != http.StatusOK || !strings.Contains(body, `id="confirm"`) || !strings.Contains(body, `action="`+path+`/edit"`) {
			t.Errorf("moving a switch that is on to L4: %d, no confirmation", status)
		}
		if got, _ := c.Service.GetSwitch(ctx, "checkout", "careful"); got.Level != wire.L3 {
			t.Fatalf("level changed to %s before the confirmation", got.Level)
		}
		edit.Set("confirmed", "yes")
		if status, _, body := cl.post(path+"/edit", edit); status != http.StatusSeeOther {
			t.Fatalf("confirmed edit: %d\n%s", status, body)
		}

		events, _, err := audit.List(ctx, c.DB, audit.Filter{Target: "switch/checkout/careful", Action: "switch.on"})
		if err != nil || len(events) != 1 {
			t.Fatalf("turn-on event: %v %v", events, err)
		}
		sw, _, _ = c.Service.TurnOff(ctx, admin, "checkout", "careful", server.Toggle{Reason: "recovered"})
		back := url.Values{"_csrf": {cl.csrf("/ui/")}, "event": {strconv.FormatInt(events[0].ID, 10)}, "reason": {"again"}, "version": {strconv.FormatInt(sw.Version, 10)}}
		status, _, body = cl.post(path+"/rollback", back)
		if status != http.StatusOK || !strings.Contains(body, `id="confirm"`) || !strings.Contains(body, "everyone") {
			t.Errorf("rolling back to on at 100 %%: %d, no confirmation", status)
		}
		if got, _ := c.Service.GetSwitch(ctx, "checkout", "careful"); got.State != wire.StateOff {
			t.Fatal("rolled back before the confirmation")
		}
	})

	t.Run("labels on the overview name their own row", func(t *testing.T) {
		mk("pay-ments", "x", true)
		mk("pay", "ments-x", true)
		_, body := cl.get("/ui/")
		seen := map[string]bool{}
		for _, m := range regexp.MustCompile(`<label class="sr-only" for="([^"]+)"`).FindAllStringSubmatch(body, -1) {
			if seen[m[1]] {
				t.Errorf("two turn-off labels point at %q", m[1])
			}
			seen[m[1]] = true
		}
		if len(seen) < 2 {
			t.Fatalf("turn-off labels: %v", seen)
		}
	})
}

// TestAuditUntilIncludesItsMinute: the browser's date-time picker sends
// minutes; "until 14:05" must include the events of 14:05:xx, and a bare
// date the whole day.
func TestAuditUntilIncludesItsMinute(t *testing.T) {
	c := startConsole(t)
	if _, _, err := c.Service.CreateSwitch(context.Background(), admin, "checkout", server.SwitchInput{Name: "just-now", Level: wire.L3, Reason: "seed"}); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	cl := newClient(t, c)
	cl.signIn("admin", bootstrapToken)
	for _, until := range []string{now.Format("2006-01-02T15:04"), now.Format("2006-01-02")} {
		if _, body := cl.get("/ui/audit?until=" + url.QueryEscape(until)); !strings.Contains(body, "switch/checkout/just-now") {
			t.Errorf("until=%s leaves out an event of that minute or day", until)
		}
	}
	if _, body := cl.get("/ui/audit?until=" + url.QueryEscape(now.Add(-2*time.Minute).Format("2006-01-02T15:04"))); strings.Contains(body, "switch/checkout/just-now") {
		t.Error("until two minutes ago shows the event of now")
	}
}

// TestHungDatabasePages: with the switches table locked by another
// session, a page answers 503 with a message within the request timeout
// instead of hanging, while an open event stream outlives that timeout and
// still delivers changes.
func TestHungDatabasePages(t *testing.T) {
	c := startConsoleWith(t, webui.Options{Clock: fastClock{}}, func(cfg *console.Config) {
		cfg.PublishWait, cfg.RequestTimeout = 200*time.Millisecond, 5*time.Second // room for a bcrypt sign-in under -race
	})
	cl := newClient(t, c)
	cl.signIn("admin", bootstrapToken)

	req, _ := http.NewRequest("GET", c.URL()+"/ui/events", nil)
	req.Header.Set("Accept", "text/event-stream")
	stream, err := cl.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	changes := make(chan struct{}, 16)
	go func() {
		sc := bufio.NewScanner(stream.Body)
		for sc.Scan() {
			if sc.Text() == "event: change" {
				changes <- struct{}{}
			}
		}
		close(changes)
	}()

	tx := c.DB.Begin() // another session holding a lock
	if err := tx.Exec("LOCK TABLE switches IN ACCESS EXCLUSIVE MODE").Error; err != nil {
		t.Fatal(err)
	}
	status, body := cl.get("/ui/switches")
	tx.Rollback()
	if status != http.StatusServiceUnavailable || !strings.Contains(body, "did not answer in time") {
		t.Fatalf("switch list with the table locked: %d\n%.3000s", status, body)
	}

	// The stream has now been open longer than the request timeout.
	if _, _, err := c.Service.CreateSwitch(context.Background(), admin, "checkout", server.SwitchInput{Name: "after-lock", Level: wire.L3, Reason: "seed"}); err != nil {
		t.Fatal(err)
	}
	select {
	case _, ok := <-changes:
		if !ok {
			t.Fatal("the event stream ended at the request timeout")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no change event within 10 s")
	}
}
