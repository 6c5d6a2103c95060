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

	"github.com/switchyard-io/switchyard/sdk/limit"
	"github.com/switchyard-io/switchyard/sdk/wire"
	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/webui"
)

// TestSecurity covers sign-in, sessions, CSRF, roles and escaping against a
// real console, as a browser without JavaScript would see it.
func TestSecurity(t *testing.T) {
	c := startConsole(t)
	ctx := context.Background()
	_, _, err := c.Service.CreateSwitch(ctx, admin, "checkout", server.SwitchInput{
		Name: "recommend", Level: wire.L3, Description: `<script>alert("x")</script> & <b>bold</b>`, Reason: "seed",
	})
	if err != nil {
		t.Fatal(err)
	}
	sw := "/ui/apps/checkout/switches/recommend"

	t.Run("signed-out requests are redirected or refused", func(t *testing.T) {
		cl := newClient(t, c)
		for _, p := range []string{"/ui/", "/ui/switches", sw, "/ui/audit", "/ui/admin"} {
			status, _ := cl.get(p)
			if status != http.StatusSeeOther {
				t.Errorf("GET %s signed out: %d, want 303 to the sign-in page", p, status)
			}
		}
		status, loc, _ := cl.post(sw+"/on", url.Values{"reason": {"x"}, "percent": {"100"}})
		if status != http.StatusUnauthorized {
			t.Errorf("POST signed out: %d %s, want 401", status, loc)
		}
	})

	t.Run("bootstrap admin signs in once with the token, then by password", func(t *testing.T) {
		cl := newClient(t, c)
		_, body := cl.get("/ui/login")
		if !strings.Contains(body, "No users exist yet") {
			t.Error("first-run hint missing on the sign-in page")
		}
		tok := cl.csrf("/ui/login")
		status, _, _ := cl.post("/ui/login", url.Values{"_csrf": {tok}, "username": {"admin"}, "password": {"not-the-token-at-all"}})
		if status != http.StatusUnauthorized {
			t.Errorf("wrong bootstrap password: %d, want 401", status)
		}
		cl.signIn("admin", bootstrapToken)
		if n, _ := c.Service.CountUsers(ctx); n != 1 {
			t.Errorf("users after bootstrap sign-in: %d", n)
		}
		newClient(t, c).signIn("admin", bootstrapToken) // the token is now admin's password
	})

	t.Run("sign-in form without its CSRF token is refused", func(t *testing.T) {
		cl := newClient(t, c)
		status, _, _ := cl.post("/ui/login", url.Values{"username": {"admin"}, "password": {bootstrapToken}})
		if status != http.StatusForbidden {
			t.Errorf("login without CSRF: %d, want 403", status)
		}
	})

	t.Run("form post without the CSRF token is refused", func(t *testing.T) {
		cl := newClient(t, c)
		cl.signIn("admin", bootstrapToken)
		form := url.Values{"reason": {"forged"}, "percent": {"50"}, "stickiness": {"instance"}}
		status, _, _ := cl.post(sw+"/on", form)
		if status != http.StatusForbidden {
			t.Errorf("POST without CSRF: %d, want 403", status)
		}
		form.Set("_csrf", "wrong-token")
		if status, _, _ := cl.post(sw+"/on", form); status != http.StatusForbidden {
			t.Errorf("POST with a wrong CSRF token: %d, want 403", status)
		}
		if s, _ := c.Service.GetSwitch(ctx, "checkout", "recommend"); s.State != wire.StateOff {
			t.Error("a refused post changed the switch")
		}
		// The same post with the token works.
		form.Set("_csrf", cl.csrf(sw))
		if status, _, body := cl.post(sw+"/on", form); status != http.StatusSeeOther {
			t.Fatalf("POST with CSRF: %d\n%s", status, body)
		}
		form = url.Values{"_csrf": {cl.csrf(sw)}, "reason": {"done"}}
		if status, _, _ := cl.post(sw+"/off", form); status != http.StatusSeeOther {
			t.Fatalf("turn off: %d", status)
		}
	})

	t.Run("viewer sees no controls and a forged write is 403", func(t *testing.T) {
		pw := mustCreateUser(t, c, "vera", server.RoleViewer)
		cl := newClient(t, c)
		cl.signIn("vera", pw)
		for _, p := range []string{"/ui/", "/ui/switches", sw, "/ui/limits"} {
			_, body := cl.get(p)
			if n := strings.Count(body, `method="post"`); n != 1 { // sign-out only
				t.Errorf("viewer sees %d forms on %s, want only sign-out", n, p)
			}
		}
		tok := cl.csrf(sw)
		status, _, body := cl.post(sw+"/on", url.Values{"_csrf": {tok}, "reason": {"forged"}, "percent": {"50"}})
		if status != http.StatusForbidden {
			t.Errorf("viewer write: %d, want 403\n%s", status, body)
		}
		if !strings.Contains(body, "role viewer cannot change anything") {
			t.Errorf("the 403 page does not say why:\n%s", body)
		}
		if status, _, _ := cl.post("/ui/admin/users", url.Values{"_csrf": {tok}, "username": {"mallory"}, "password": {"0123456789ab"}, "role": {"admin"}, "reason": {"x"}}); status != http.StatusForbidden {
			t.Errorf("viewer creates a user: %d, want 403", status)
		}
		if status, _ := cl.get("/ui/admin"); status != http.StatusForbidden {
			t.Errorf("viewer opens admin: %d, want 403", status)
		}
	})

	t.Run("operator is limited to its apps", func(t *testing.T) {
		pw := mustCreateUser(t, c, "otto", server.RoleOperator, "search")
		cl := newClient(t, c)
		cl.signIn("otto", pw)
		status, _, _ := cl.post(sw+"/on", url.Values{"_csrf": {cl.csrf(sw)}, "reason": {"x"}, "percent": {"50"}})
		if status != http.StatusForbidden {
			t.Errorf("operator of search writes checkout: %d, want 403", status)
		}
	})

	t.Run("templates escape a description containing script", func(t *testing.T) {
		cl := newClient(t, c)
		cl.signIn("admin", bootstrapToken)
		for _, p := range []string{sw, "/ui/switches"} {
			_, body := cl.get(p)
			if strings.Contains(body, `<script>alert`) || strings.Contains(body, "<b>bold</b>") {
				t.Errorf("%s renders the description unescaped", p)
			}
			if !strings.Contains(body, `&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; &amp; &lt;b&gt;bold&lt;/b&gt;`) {
				t.Errorf("%s does not show the escaped description", p)
			}
		}
	})

	t.Run("errors are shown next to the field", func(t *testing.T) {
		cl := newClient(t, c)
		cl.signIn("admin", bootstrapToken)
		tok := cl.csrf("/ui/switches/new")
		status, _, body := cl.post("/ui/switches", url.Values{"_csrf": {tok}, "app": {"checkout"}, "name": {"Bad Name"}, "level": {"L1"}, "fallback": {"{not json"}, "max_on": {"24h"}, "expiry_policy": {"remind"}, "reason": {"r"}})
		if status != http.StatusBadRequest || !strings.Contains(body, "must be valid JSON") {
			t.Errorf("bad fallback: %d, no field error", status)
		}
		status, _, body = cl.post("/ui/limits/save", url.Values{"_csrf": {tok}, "app": {"checkout"}, "resource": {"POST /orders"}, "kind": {"token_bucket"}, "token_bucket.rate": {"0"}, "token_bucket.burst": {"5"}, "mode": {"enforce"}, "scope": {"instance"}, "reason": {"r"}})
		if status != http.StatusBadRequest || !strings.Contains(body, "must be greater than 0") {
			t.Errorf("bad limit: %d, no field error\n%s", status, body)
		}
		status, _, body = cl.post(sw+"/on", url.Values{"_csrf": {tok}, "percent": {"25"}})
		if status != http.StatusBadRequest || !strings.Contains(body, "is required: say why") {
			t.Errorf("missing reason: %d", status)
		}
		// A limit rule of every kind saves from the editor.
		for kind, params := range map[string]url.Values{
			"token_bucket": {"rate": {"100"}, "burst": {"20"}}, "sliding_window": {"limit": {"50"}, "window": {"1s"}},
			"concurrency": {"max": {"8"}}, "gcra": {"rate": {"10"}, "max_wait": {"100ms"}}, "adaptive": {"min": {"2"}, "max": {"40"}},
			"breaker": {"error_rate": {"0.5"}, "min_requests": {"20"}, "window": {"10s"}, "open_duration": {"5s"}, "half_open_probes": {"2"}},
		} {
			f := url.Values{"_csrf": {tok}, "app": {"checkout"}, "resource": {"res " + kind}, "kind": {kind}, "mode": {"shadow"}, "scope": {"instance"}, "reason": {"r"}}
			for k, v := range params {
				f[kind+"."+k] = v
			}
			if status, _, body := cl.post("/ui/limits/save", f); status != http.StatusSeeOther {
				t.Errorf("create %s rule: %d\n%s", kind, status, body)
			}
		}
		// A left-empty input takes the default (above: adaptive window,
		// max_open_duration); an explicit 0 is refused at its input.
		status, _, body = cl.post("/ui/limits/save", url.Values{"_csrf": {tok}, "app": {"checkout"}, "resource": {"res zero"}, "kind": {"adaptive"},
			"adaptive.min": {"1"}, "adaptive.max": {"8"}, "adaptive.window": {"0s"}, "mode": {"enforce"}, "scope": {"instance"}, "reason": {"r"}})
		if status != http.StatusBadRequest || !strings.Contains(body, "must be greater than 0 (leave it out for the default)") {
			t.Errorf("adaptive window 0s: %d, no field error\n%s", status, body)
		}
		// Creating a rule that exists says so next to its resource field.
		status, _, body = cl.post("/ui/limits/save", url.Values{"_csrf": {tok}, "app": {"checkout"}, "resource": {"res concurrency"}, "kind": {"concurrency"}, "concurrency.max": {"3"}, "mode": {"enforce"}, "scope": {"instance"}, "reason": {"r"}})
		if status != http.StatusConflict || !regexp.MustCompile(`name="resource"[^>]*>\s*<span class="ferr" role="alert">Resource: is taken</span>`).MatchString(body) {
			t.Errorf("duplicate limit rule: %d, no \"is taken\" at the resource field\n%s", status, body)
		}
	})

	t.Run("admin manages users and tokens", func(t *testing.T) {
		adm := newClient(t, c)
		adm.signIn("admin", bootstrapToken)
		tok := adm.csrf("/ui/admin")
		status, _, body := adm.post("/ui/admin/users", url.Values{"_csrf": {tok}, "username": {"olga"}, "password": {"short"}, "role": {"operator"}, "apps": {"checkout"}, "reason": {"on call"}})
		if status != http.StatusBadRequest || !strings.Contains(body, "must be at least 10 characters") {
			t.Errorf("short password: %d", status)
		}
		if status, _, body := adm.post("/ui/admin/users", url.Values{"_csrf": {tok}, "username": {"olga"}, "password": {"olga-first-password"}, "role": {"operator"}, "apps": {"checkout"}, "reason": {"on call"}}); status != http.StatusSeeOther {
			t.Fatalf("create user: %d\n%s", status, body)
		}
		olga := newClient(t, c)
		olga.signIn("olga", "olga-first-password")
		otok := olga.csrf("/ui/account")
		status, _, body = olga.post("/ui/account/password", url.Values{"_csrf": {otok}, "current": {"wrong-password"}, "password": {"olga-second-password"}, "confirm": {"olga-second-password"}})
		if status != http.StatusBadRequest || !strings.Contains(body, "is not your current password") {
			t.Errorf("wrong current password: %d", status)
		}
		if status, _, _ := olga.post("/ui/account/password", url.Values{"_csrf": {otok}, "current": {"olga-first-password"}, "password": {"olga-second-password"}, "confirm": {"olga-second-password"}}); status != http.StatusSeeOther {
			t.Errorf("change password: %d", status)
		}
		newClient(t, c).signIn("olga", "olga-second-password")
		if status, _, _ := adm.post("/ui/admin/users/olga", url.Values{"_csrf": {tok}, "role": {"operator"}, "apps": {"checkout"}, "disabled": {"on"}, "reason": {"left the team"}}); status != http.StatusSeeOther {
			t.Fatalf("disable user: %d", status)
		}
		if status, _ := olga.get("/ui/"); status != http.StatusSeeOther {
			t.Errorf("disabled user's session still works: %d", status)
		}
		status, _, body = adm.post("/ui/admin/tokens", url.Values{"_csrf": {tok}, "name": {"ci-deploy"}, "role": {"viewer"}, "reason": {"CI reads switches"}})
		if status != http.StatusCreated {
			t.Fatalf("mint token: %d\n%s", status, body)
		}
		secret := regexp.MustCompile(`id="new-token" readonly value="([^"]+)"`).FindStringSubmatch(body)
		if secret == nil {
			t.Fatal("the minted token is not shown")
		}
		req, _ := http.NewRequest(http.MethodGet, c.URL()+"/api/v1/switches", nil)
		req.Header.Set("Authorization", "Bearer "+secret[1])
		res, err := http.DefaultClient.Do(req)
		if err != nil || res.StatusCode != http.StatusOK {
			t.Errorf("API with the minted token: %v %v", res.StatusCode, err)
		}
		res.Body.Close()
		if _, body := adm.get("/ui/admin"); strings.Contains(body, secret[1]) {
			t.Error("the token is shown again")
		}
		if _, body := adm.get("/ui/audit?action=user.password"); !strings.Contains(body, "user/olga") {
			t.Error("password change is not in the audit log")
		}
	})

	t.Run("sign-out and expired sessions end access", func(t *testing.T) {
		cl := newClient(t, c)
		cl.signIn("admin", bootstrapToken)
		if status, _, _ := cl.post("/ui/logout", url.Values{"_csrf": {cl.csrf("/ui/")}}); status != http.StatusSeeOther {
			t.Fatalf("sign out: %d", status)
		}
		if status, _ := cl.get("/ui/"); status != http.StatusSeeOther {
			t.Errorf("after sign-out: %d, want 303", status)
		}
		cl = newClient(t, c)
		cl.signIn("admin", bootstrapToken)
		c.DB.Exec("UPDATE web_sessions SET expires_at = ?", time.Now().Add(-time.Minute))
		if status, _ := cl.get("/ui/"); status != http.StatusSeeOther {
			t.Errorf("expired session: %d, want 303", status)
		}
	})

	t.Run("event stream reports a change made through the API", func(t *testing.T) {
		cl := newClient(t, c)
		cl.signIn("admin", bootstrapToken)
		cl.http.Timeout = 0
		req, _ := http.NewRequest(http.MethodGet, c.URL()+"/ui/events", nil)
		req.Header.Set("Accept", "text/event-stream")
		res, err := cl.http.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		lines := make(chan string, 100)
		go func() {
			sc := bufio.NewScanner(res.Body)
			for sc.Scan() {
				lines <- sc.Text()
			}
			close(lines)
		}()
		waitLine := func(prefix string, d time.Duration) bool {
			deadline := time.After(d)
			for {
				select {
				case l, ok := <-lines:
					if !ok {
						return false
					}
					if strings.HasPrefix(l, prefix) {
						return true
					}
				case <-deadline:
					return false
				}
			}
		}
		waitLine("id:", 2*time.Second)
		start := time.Now()
		if _, _, err := c.Service.TurnOn(ctx, admin, "checkout", "recommend", server.Toggle{Reason: "from the API"}); err != nil {
			t.Fatal(err)
		}
		if !waitLine("event: change", time.Second) {
			t.Fatal("no change event within 1s")
		}
		t.Logf("change event %v after the API call started", time.Since(start))
	})
}

// TestSignInThrottle: password guessing is slowed per username and per
// client address, and a throttled attempt is refused even with the right
// password.
func TestSignInThrottle(t *testing.T) {
	clock := limit.NewFakeClock()
	c := startConsoleWith(t, webui.Options{Clock: clock})
	newClient(t, c).signIn("admin", bootstrapToken) // creates admin; 1 of 5 for "admin"
	cl := newClient(t, c)
	for i := 0; i < 4; i++ {
		tok := cl.csrf("/ui/login")
		if status, _, _ := cl.post("/ui/login", url.Values{"_csrf": {tok}, "username": {"admin"}, "password": {"guess-" + strconv.Itoa(i)}}); status != http.StatusUnauthorized {
			t.Fatalf("guess %d: %d, want 401", i, status)
		}
	}
	tok := cl.csrf("/ui/login")
	status, _, body := cl.post("/ui/login", url.Values{"_csrf": {tok}, "username": {"admin"}, "password": {bootstrapToken}})
	if status != http.StatusTooManyRequests || !strings.Contains(body, "Too many sign-in attempts") {
		t.Fatalf("6th attempt with the right password: %d, want 429", status)
	}
	clock.Advance(13 * time.Second)
	newClient(t, c).signIn("admin", bootstrapToken)

	// Per address: 20 attempts across made-up names, then refused.
	clock.Advance(time.Hour)
	for i := 0; ; i++ {
		tok := cl.csrf("/ui/login")
		status, _, _ := cl.post("/ui/login", url.Values{"_csrf": {tok}, "username": {"nobody-" + strconv.Itoa(i)}, "password": {"x"}})
		if status == http.StatusTooManyRequests {
			if i != 20 {
				t.Fatalf("address throttled after %d attempts, want 20", i)
			}
			break
		}
		if i > 20 {
			t.Fatal("address never throttled")
		}
	}
}
