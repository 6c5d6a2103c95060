package webui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/sdk/wire"
	"github.com/switchyard-io/switchyard/server"
)

// fieldErr matches the error of the input named input, shown right under
// it, naming its label and starting with msg (a hint may follow).
func fieldErr(input, label, msg string) *regexp.Regexp {
	return regexp.MustCompile(`name="` + regexp.QuoteMeta(input) + `"[^>]*>\s*<span class="ferr" role="alert">` + regexp.QuoteMeta(label+": "+msg) + `[^<]*</span>`)
}

// TestFormsNameTheirFields: a form's error stands under the input it is
// about and names it; forms start from the API's defaults; a limit rule's
// state is "on" or "off", nothing else.
func TestFormsNameTheirFields(t *testing.T) {
	c := startConsole(t)
	ctx := context.Background()
	cl := newClient(t, c)
	cl.signIn("admin", bootstrapToken)
	tok := cl.csrf("/ui/")

	t.Run("breaker errors name their field", func(t *testing.T) {
		status, _, body := cl.post("/ui/limits/save", url.Values{"_csrf": {tok}, "app": {"checkout"}, "resource": {"dep"}, "kind": {"breaker"},
			"breaker.error_rate": {"0.5"}, "breaker.window": {"10s"}, "breaker.open_duration": {"5s"}, "breaker.min_requests": {""}, "breaker.half_open_probes": {"-1"},
			"mode": {"enforce"}, "scope": {"instance"}, "reason": {"protect the ledger"}})
		if status != http.StatusBadRequest {
			t.Fatalf("bad breaker: %d\n%s", status, body)
		}
		for in, label := range map[string]string{"breaker.min_requests": "Min requests per window", "breaker.half_open_probes": "Half-open probes"} {
			if !fieldErr(in, label, "must be greater than 0").MatchString(body) {
				t.Errorf("no error naming %q under its input\n%s", label, body)
			}
		}
		if !strings.Contains(body, `name="breaker.error_rate" value="0.5"`) || !strings.Contains(body, `value="protect the ledger"`) {
			t.Error("the editor lost what was typed")
		}
	})

	t.Run("an L4 switch's warm-up is checked and stored", func(t *testing.T) {
		form := url.Values{"_csrf": {tok}, "app": {"checkout"}, "name": {"db-readonly"}, "level": {"L4"}, "warm_up": {"0"},
			"max_on": {"72h"}, "expiry_policy": {"remind"}, "reason": {"writes ramp back"}}
		status, _, body := cl.post("/ui/switches", form)
		if status != http.StatusBadRequest || !fieldErr("warm_up", "Warm-up", "must be a duration between 1s and 10m").MatchString(body) {
			t.Fatalf("warm_up 0: %d, want 400 marked at Warm-up\n%s", status, body)
		}
		form.Set("warm_up", "2m")
		if status, _, body := cl.post("/ui/switches", form); status != http.StatusSeeOther {
			t.Fatalf("warm_up 2m: %d\n%s", status, body)
		}
		if got, err := c.Service.GetSwitch(ctx, "checkout", "db-readonly"); err != nil || got.Wire().WarmUp.D() != 2*time.Minute {
			t.Fatalf("stored switch %+v, %v: want warm_up 2m", got, err)
		}
	})

	t.Run("a new breaker starts with the API's half-open probes", func(t *testing.T) {
		_, body := cl.get("/ui/limits/edit?app=checkout")
		if !strings.Contains(body, fmt.Sprintf(`name="breaker.half_open_probes" value="%d"`, server.DefaultHalfOpenProbes)) {
			t.Errorf("half_open_probes has no default\n%s", body)
		}
	})

	t.Run("a short password is marked at the password", func(t *testing.T) {
		status, _, body := cl.post("/ui/admin/users", url.Values{"_csrf": {tok}, "username": {"olga"}, "password": {"short"}, "role": {"operator"}, "apps": {"checkout"}, "reason": {"on call"}})
		if status != http.StatusBadRequest || !fieldErr("password", "Password", "must be at least 10 characters").MatchString(body) {
			t.Errorf("short password: %d, the error is not at the password field\n%s", status, body)
		}
		if fieldErr("username", "Username", "must be at least 10 characters").MatchString(body) || !strings.Contains(body, `name="username" required value="olga"`) {
			t.Error("the username lost its value or got the password's error")
		}
	})

	t.Run("an unknown limit state is refused, naming state", func(t *testing.T) {
		r, _, err := c.Service.CreateLimit(ctx, admin, "checkout", server.LimitInput{LimitRule: wire.LimitRule{Resource: "GET /cart", Kind: wire.KindConcurrency, Max: 5}, Reason: "seed"})
		if err != nil {
			t.Fatal(err)
		}
		status, _, body := cl.post("/ui/limits/state", url.Values{"_csrf": {tok}, "app": {"checkout"}, "resource": {"GET /cart"}, "state": {"of"},
			"version": {strconv.FormatInt(r.Version, 10)}, "reason": {"typo in a script"}})
		if status != http.StatusBadRequest || !strings.Contains(body, `State: must be &#34;on&#34; or &#34;off&#34;`) {
			t.Errorf("state=of: %d, want 400 naming state\n%s", status, body)
		}
		if got, _ := c.Service.GetLimit(ctx, "checkout", "GET /cart"); got.State != wire.StateOn {
			t.Errorf("state=of turned the rule %s", got.State)
		}
	})

	t.Run("key lists are pasted, counted, and a key in both lists is marked", func(t *testing.T) {
		sw, _, err := c.Service.CreateSwitch(ctx, admin, "checkout", server.SwitchInput{Name: "tenants", Level: wire.L3, Reason: "seed"})
		if err != nil {
			t.Fatal(err)
		}
		on := func(v url.Values) (int, string) {
			v.Set("_csrf", tok)
			v.Set("reason", "tenants first")
			v.Set("percent", "0")
			status, _, body := cl.post("/ui/apps/checkout/switches/tenants/on", v)
			return status, body
		}
		status, body := on(url.Values{"version": {strconv.FormatInt(sw.Version, 10)}, "include": {"t1\nt2, t3"}, "exclude": {"audit t2"}})
		if status != http.StatusBadRequest || !regexp.MustCompile(`name="exclude"[^>]*>audit t2</textarea>\s*<span class="ferr" role="alert">Exclude keys: key &#34;t2&#34; is also in include</span>`).MatchString(body) {
			t.Fatalf("a key in both lists: %d, want 400 marked at Exclude keys\n%s", status, body)
		}
		if got, _ := c.Service.GetSwitch(ctx, "checkout", "tenants"); got.State != wire.StateOff {
			t.Fatal("the refused form turned the switch on")
		}
		if status, body = on(url.Values{"version": {strconv.FormatInt(sw.Version, 10)}, "include": {"t1\nt2, t3"}, "exclude": {"audit"}}); status != http.StatusSeeOther {
			t.Fatalf("valid lists: %d\n%s", status, body)
		}
		got, _ := c.Service.GetSwitch(ctx, "checkout", "tenants")
		if r := got.Rollout(); !slices.Equal(r.Include, []string{"t1", "t2", "t3"}) || !slices.Equal(r.Exclude, []string{"audit"}) {
			t.Fatalf("stored lists %q / %q", r.Include, r.Exclude)
		}
		if _, page := cl.get("/ui/apps/checkout/switches/tenants"); !strings.Contains(page, "+ 3 included keys") || !strings.Contains(page, "− 1 excluded key") {
			t.Errorf("the switch page does not count the lists\n%s", page)
		}
		// A form without the list fields (the overview's quick turn-on)
		// keeps them.
		if status, body = on(url.Values{"version": {strconv.FormatInt(got.Version, 10)}}); status != http.StatusSeeOther {
			t.Fatalf("rollout change without lists: %d\n%s", status, body)
		}
		if r, _ := c.Service.GetSwitch(ctx, "checkout", "tenants"); len(r.Rollout().Include) != 3 {
			t.Errorf("a form without lists dropped them: %q", r.Rollout().Include)
		}
	})

	t.Run("a new switch starts with the API's max time on", func(t *testing.T) {
		want := strings.TrimSuffix(strings.TrimSuffix(server.DefaultMaxOn.String(), "0s"), "0m")
		if _, body := cl.get("/ui/switches/new"); !strings.Contains(body, `name="max_on" value="`+want+`"`) {
			t.Errorf("the new-switch form does not default max_on to %s", want)
		}
	})
}

// TestViewersReadOnly: people who may change nothing get read-only pages,
// never a form that would fail; an operator naming another app keeps what
// was typed.
func TestViewersReadOnly(t *testing.T) {
	c := startConsole(t)
	ctx := context.Background()
	newClient(t, c).signIn("admin", bootstrapToken)
	if _, _, err := c.Service.CreateLimit(ctx, admin, "checkout", server.LimitInput{LimitRule: wire.LimitRule{Resource: "POST /orders", Kind: wire.KindTokenBucket, Rate: 200, Burst: 50}, Reason: "seed"}); err != nil {
		t.Fatal(err)
	}
	rule := "/ui/limits/edit?" + url.Values{"app": {"checkout"}, "resource": {"POST /orders"}}.Encode()
	viewer := newClient(t, c)
	viewer.signIn("vera", mustCreateUser(t, c, "vera", server.RoleViewer))

	for path, form := range map[string]string{"/ui/switches/new": `id="new-switch"`, "/ui/limits/edit": `id="limit-form"`} {
		status, body := viewer.get(path)
		if status != http.StatusForbidden || strings.Contains(body, form) || !strings.Contains(body, "may not create") {
			t.Errorf("GET %s by a reader: %d, want 403 with a sentence and no form", path, status)
		}
	}
	status, body := viewer.get(rule)
	if status != http.StatusOK || !strings.Contains(body, `id="limit-facts"`) || strings.Contains(body, "<pre") {
		t.Errorf("a reader's limit rule: %d, want the rule's facts and no raw dump", status)
	}
	for _, want := range []string{"<dt>Rate (requests per second)</dt><dd>200</dd>", "<dt>Burst (bucket size)</dt><dd>50</dd>", "<dt>Mode</dt><dd>enforce (rejects)</dd>"} {
		if !strings.Contains(body, want) {
			t.Errorf("the read-only rule lacks %s", want)
		}
	}
	if n := strings.Count(body, `method="post"`); n != 1 { // sign-out only
		t.Errorf("a reader's rule page has %d forms", n)
	}

	status, body = viewer.get("/ui/limits/edit?resource=" + url.QueryEscape("POST /orders"))
	if status != http.StatusBadRequest || !strings.Contains(body, "without its app") || strings.Contains(body, "<pre") {
		t.Errorf("a rule link without its app: %d\n%s", status, body)
	}

	op := newClient(t, c)
	op.signIn("otto", mustCreateUser(t, c, "otto", server.RoleOperator, "search"))
	status, _, body = op.post("/ui/switches", url.Values{"_csrf": {op.csrf("/ui/switches/new")}, "app": {"checkout"}, "name": {"my-switch"}, "level": {"L3"},
		"description": {"typed with care"}, "max_on": {"72h"}, "expiry_policy": {"remind"}, "reason": {"INC-9"}})
	if status != http.StatusBadRequest || !fieldErr("app", "App", "you may not change app checkout (you may change: search)").MatchString(body) {
		t.Errorf("an operator creating in another app: %d, no error at the app\n%s", status, body)
	}
	for _, kept := range []string{`value="my-switch"`, `typed with care`, `value="INC-9"`} {
		if !strings.Contains(body, kept) {
			t.Errorf("the form lost %s", kept)
		}
	}
}

// TestPagesForPeople: a browser gets a page with one clear sentence for a
// path that does not exist, a switch that does not exist, an expired form
// or a missing sign-in; API clients keep their problem documents.
func TestPagesForPeople(t *testing.T) {
	c := startConsole(t)
	cl := newClient(t, c)

	t.Run("sign-in tells missing from wrong", func(t *testing.T) {
		tok := cl.csrf("/ui/login")
		status, _, body := cl.post("/ui/login", url.Values{"_csrf": {tok}, "username": {"admin"}, "password": {""}})
		if status != http.StatusBadRequest || !strings.Contains(body, "No token given") {
			t.Errorf("first run, no token: %d\n%s", status, body)
		}
		cl.signIn("admin", bootstrapToken)
		other := newClient(t, c)
		tok = other.csrf("/ui/login")
		status, _, body = other.post("/ui/login", url.Values{"_csrf": {tok}, "username": {"admin"}, "password": {""}})
		if status != http.StatusBadRequest || !strings.Contains(body, "No password given") || strings.Contains(body, "Wrong") {
			t.Errorf("no password: %d\n%s", status, body)
		}
		status, _, body = other.post("/ui/login", url.Values{"_csrf": {other.csrf("/ui/login")}, "username": {"admin"}, "password": {"not-the-password"}})
		if status != http.StatusUnauthorized || !strings.Contains(body, "Wrong username or password.") {
			t.Errorf("wrong password: %d\n%s", status, body)
		}
	})

	t.Run("an unknown page is a page", func(t *testing.T) {
		for _, who := range []*client{cl, newClient(t, c)} {
			req, _ := http.NewRequest(http.MethodGet, c.URL()+"/ui/no/such/page", nil)
			req.Header.Set("Accept", browserAccept)
			res, err := who.http.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != http.StatusNotFound || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") || !strings.Contains(string(b), "There is no page at /ui/no/such/page.") {
				t.Errorf("unknown page: %d %s\n%s", res.StatusCode, res.Header.Get("Content-Type"), b)
			}
			if res.Header.Get("Content-Security-Policy") == "" {
				t.Error("the not-found page has no Content-Security-Policy")
			}
		}
		if _, body := cl.get("/ui/no/such/page"); !strings.Contains(body, `aria-label="Main"`) {
			t.Error("signed in, the not-found page has no navigation")
		}
	})

	t.Run("API clients keep problem documents", func(t *testing.T) {
		for _, path := range []string{"/ui/no/such/page", "/api/v1/no/such/thing"} {
			res, err := http.Get(c.URL() + path)
			if err != nil {
				t.Fatal(err)
			}
			var p struct {
				Status    int    `json:"status"`
				Instance  string `json:"instance"`
				RequestID string `json:"request_id"`
			}
			err = json.NewDecoder(res.Body).Decode(&p)
			res.Body.Close()
			if res.StatusCode != http.StatusNotFound || res.Header.Get("Content-Type") != "application/problem+json" || err != nil || p.Status != 404 || p.Instance != path || p.RequestID == "" {
				t.Errorf("GET %s without Accept: text/html: %d %s %+v %v", path, res.StatusCode, res.Header.Get("Content-Type"), p, err)
			}
		}
	})

	t.Run("a missing switch is named once", func(t *testing.T) {
		status, body := cl.get("/ui/apps/checkout/switches/ghost")
		if status != http.StatusNotFound || !strings.Contains(body, "There is no switch checkout/ghost.") || strings.Contains(strings.ToLower(body), "not found: not found") {
			t.Errorf("missing switch: %d\n%s", status, body)
		}
	})

	t.Run("an expired form and a lost session are pages", func(t *testing.T) {
		status, _, body := cl.post("/ui/apps/checkout/switches/ghost/on", url.Values{"_csrf": {"stale"}, "reason": {"x"}, "percent": {"5"}})
		if status != http.StatusForbidden || !strings.Contains(body, "<!doctype html>") || !strings.Contains(body, "reload the page") {
			t.Errorf("stale CSRF token: %d\n%s", status, body)
		}
		status, _, body = newClient(t, c).post("/ui/apps/checkout/switches/ghost/on", url.Values{"reason": {"x"}})
		if status != http.StatusUnauthorized || !strings.Contains(body, "<!doctype html>") || !strings.Contains(body, "You are not signed in") {
			t.Errorf("signed out post: %d\n%s", status, body)
		}
	})
}

// TestOverviewLimitsAndTurnOn: the Overview lists the limit rules in force
// (on and enforcing, breakers too) next to the switches that are on, and
// turns a switch on from its own form.
func TestOverviewLimitsAndTurnOn(t *testing.T) {
	c := startConsole(t)
	ctx := context.Background()
	cl := newClient(t, c)
	cl.signIn("admin", bootstrapToken)
	for _, r := range []wire.LimitRule{
		{Resource: "POST /orders", Kind: wire.KindTokenBucket, Rate: 200, Burst: 50},
		{Resource: "ledger", Kind: wire.KindBreaker, ErrorRate: 0.5, MinRequests: 20, Window: wire.Duration(10 * time.Second), OpenDuration: wire.Duration(5 * time.Second), HalfOpenProbes: 1},
		{Resource: "GET /shadowed", Kind: wire.KindConcurrency, Max: 3, Mode: wire.ModeShadow},
		{Resource: "GET /withdrawn", Kind: wire.KindConcurrency, Max: 3},
	} {
		if _, _, err := c.Service.CreateLimit(ctx, admin, "checkout", server.LimitInput{LimitRule: r, Reason: "seed"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := c.Service.SetLimitState(ctx, admin, "checkout", "GET /withdrawn", wire.StateOff, server.Toggle{Reason: "seed"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Service.CreateSwitch(ctx, admin, "checkout", server.SwitchInput{Name: "recommend", Level: wire.L3, Rollout: &wire.Rollout{Percent: 100, Stickiness: wire.StickyKey, Selector: "zone=a"}, Reason: "seed"}); err != nil {
		t.Fatal(err)
	}

	_, body := cl.get("/ui/")
	at := strings.Index(body, `id="limits-h"`)
	if at < 0 {
		t.Fatalf("the Overview has no section of limits in force\n%s", body)
	}
	section := body[at:]
	for _, want := range []string{"<code>POST /orders</code>", "<code>ledger</code>", "2</strong> limit rules are on in enforce mode", "not reported"} {
		if !strings.Contains(section, want) {
			t.Errorf("limits in force lack %q\n%s", want, section)
		}
	}
	for _, not := range []string{"GET /shadowed", "GET /withdrawn"} {
		if strings.Contains(section, not) {
			t.Errorf("limits in force list %s", not)
		}
	}

	tok := cl.csrf("/ui/")
	status, _, body := cl.post("/ui/switches/on", url.Values{"_csrf": {tok}, "back": {"/ui/"}, "switch": {"checkout/recomend"}, "reason": {"INC-5 recommender slow"}, "percent": {"25"}})
	if status != http.StatusBadRequest || !fieldErr("switch", "Switch", "there is no switch checkout/recomend").MatchString(body) || !strings.Contains(body, `value="INC-5 recommender slow"`) {
		t.Errorf("a typo in the switch: %d\n%s", status, body)
	}
	if !regexp.MustCompile(`<details class="card quick-on" id="quick-on" open>`).MatchString(body) {
		t.Error("the failed turn-on form is closed")
	}
	status, loc, body := cl.post("/ui/switches/on", url.Values{"_csrf": {tok}, "back": {"/ui/"}, "switch": {"checkout/recommend"}, "reason": {"INC-5 recommender slow"}, "percent": {"25"}})
	if status != http.StatusSeeOther || loc != "/ui/" {
		t.Fatalf("turn on from the Overview: %d %s\n%s", status, loc, body)
	}
	sw, _ := c.Service.GetSwitch(ctx, "checkout", "recommend")
	if r := sw.Rollout(); sw.State != wire.StateOn || r.Percent != 25 || r.Stickiness != wire.StickyKey || r.Selector != "zone=a" || sw.Reason != "INC-5 recommender slow" {
		t.Errorf("after the Overview's turn-on: %s %+v %q", sw.State, r, sw.Reason)
	}
	status, _, body = cl.post("/ui/switches/on", url.Values{"_csrf": {tok}, "back": {"/ui/"}, "switch": {"checkout/recommend"}, "reason": {"widen"}, "percent": {"100"}})
	if status != http.StatusOK || !strings.Contains(body, `id="confirm"`) || !strings.Contains(body, `action="/ui/apps/checkout/switches/recommend/on"`) {
		t.Errorf("100 %% from the Overview: %d, no confirmation\n%s", status, body)
	}
}
