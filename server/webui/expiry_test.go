package webui_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/etcdtest"
	"github.com/switchyard-io/switchyard/internal/pgtest"
	"github.com/switchyard-io/switchyard/internal/servertest"
	"github.com/switchyard-io/switchyard/sdk/wire"
	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/console"
	"github.com/switchyard-io/switchyard/server/finding"
	"github.com/switchyard-io/switchyard/server/webui"
)

// startClocked runs a console whose clock is real time plus *offset, with
// the expiry jobs looking every 100 ms.
func startClocked(t *testing.T, offset *atomic.Int64) *console.Console {
	t.Helper()
	cfg := console.DefaultConfig()
	cfg.Listen, cfg.DataDir, cfg.DatabaseURL = "127.0.0.1:0", t.TempDir(), pgtest.NewDatabase(t)
	cfg.EtcdEndpoints, cfg.BootstrapToken = []string{etcdtest.Start(t).Endpoint}, bootstrapToken
	cfg.ExpiryInterval = 100 * time.Millisecond
	now := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	c, err := console.Start(context.Background(), cfg, nil, console.WithWebUI(webui.Options{Clock: fastClock{}}), console.WithClock(now))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Shutdown(ctx)
	})
	return c
}

// TestExpiryPages: a switch on past its expiry shows on the Overview and
// on its page as "on for … — confirm or turn off" with a renew form, and
// the navigation bar counts the open findings; renewing without a reason
// is refused under the reason field; renewing clears the banner and
// resolves the finding, which the Findings page lists with its
// resolution.
func TestExpiryPages(t *testing.T) {
	var offset atomic.Int64
	c := startClocked(t, &offset)
	ctx := context.Background()
	if _, _, err := c.Service.CreateSwitch(ctx, admin, "checkout", server.SwitchInput{Name: "reco", Level: wire.L3, MaxOn: "1h", Owner: "team-recs", Reason: "seed"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Service.TurnOn(ctx, admin, "checkout", "reco", server.Toggle{Reason: "INC-5"}); err != nil {
		t.Fatal(err)
	}
	offset.Store(int64(time.Hour + time.Second))
	servertest.Eventually(t, 10*time.Second, "expired_on opens", func() bool {
		list, _ := finding.List(c.DB, finding.Filter{Kind: finding.ExpiredOn, Open: true})
		return len(list) == 1
	})
	cl := newClient(t, c)
	cl.signIn("admin", bootstrapToken)

	_, home := cl.get("/ui/")
	if !strings.Contains(home, "1 switch is on past its expiry") || !strings.Contains(home, "on for 1h 0m — confirm or turn off") {
		t.Fatalf("no expiry banner on the Overview\n%s", home)
	}
	if !strings.Contains(home, `id="nav-findings"`) || !strings.Contains(home, `>1<span class="sr-only"> open</span>`) {
		t.Fatalf("no findings count in the navigation bar\n%s", home)
	}
	page := "/ui/apps/checkout/switches/reco"
	_, body := cl.get(page)
	if !strings.Contains(body, "checkout/reco on for 1h 0m — confirm or turn off") || !strings.Contains(body, `action="/ui/apps/checkout/switches/reco/renew"`) {
		t.Fatalf("no banner or renew form on the switch page\n%s", body)
	}
	tok := cl.csrf(page)
	status, _, body := cl.post(page+"/renew", url.Values{"_csrf": {tok}, "reason": {""}})
	if status != http.StatusBadRequest || !fieldErr("reason", "Reason to keep it on", "is required: say why you make this change").MatchString(body) {
		t.Fatalf("renew without a reason: %d\n%s", status, body)
	}
	status, loc, _ := cl.post(page+"/renew", url.Values{"_csrf": {tok}, "reason": {"INC-5 still open"}})
	if status != http.StatusSeeOther || loc != page {
		t.Fatalf("renew: %d %s", status, loc)
	}
	_, body = cl.get(page)
	if strings.Contains(body, "confirm or turn off") || !strings.Contains(body, "Renewed checkout/reco: it stays on until") {
		t.Fatalf("after renewing\n%s", body)
	}
	_, body = cl.get("/ui/findings?state=all&kind=expired_on")
	if !strings.Contains(body, "renewed by admin until ") {
		t.Fatalf("the Findings page lacks the resolution\n%s", body)
	}
	if status, body := cl.get("/ui/findings?kind=bored"); status != http.StatusBadRequest || !strings.Contains(body, "is not a finding kind") {
		t.Fatalf("bad filter: %d\n%s", status, body)
	}
}

// TestChannelsPage: an admin adds a channel (a bad URL is refused under
// its field, and the secret is never echoed), sends a test and sees the
// receiver's answer and the delivery log; a viewer gets neither the page
// nor its link.
func TestChannelsPage(t *testing.T) {
	c := startConsole(t)
	var got atomic.Int64
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got.Add(1) }))
	t.Cleanup(rcv.Close)
	if err := c.Egress.Allow(rcv.Listener.Addr().String()); err != nil { // the receiver this test started
		t.Fatal(err)
	}
	cl := newClient(t, c)
	cl.signIn("admin", bootstrapToken)
	tok := cl.csrf("/ui/channels")
	form := url.Values{"_csrf": {tok}, "name": {"ops"}, "url": {"ftp://files"}, "secret": {"a-secret-never-shown-1"}, "events": {"expiry.reminder", "expiry.escalation"}, "format": {"json"}, "reason": {"on-call"}}
	status, _, body := cl.post("/ui/channels", form)
	if status != http.StatusBadRequest || !fieldErr("url", "URL", "must be an http:// or https:// URL with a host").MatchString(body) {
		t.Fatalf("bad URL: %d\n%s", status, body)
	}
	if strings.Contains(body, "a-secret-never-shown-1") || !strings.Contains(body, `value="expiry.escalation" checked`) {
		t.Fatalf("the form echoed the secret or lost the events\n%s", body)
	}
	form.Set("url", rcv.URL+"/hook/token-in-path")
	if status, loc, body := cl.post("/ui/channels", form); status != http.StatusSeeOther || loc != "/ui/channels" {
		t.Fatalf("add channel: %d %s\n%s", status, loc, body)
	}
	_, body = cl.get("/ui/channels")
	if strings.Contains(body, "a-secret-never-shown-1") || !strings.Contains(body, "<code>"+rcv.URL+"/…</code>") {
		t.Fatalf("the channel list shows the secret or the URL's path\n%s", body)
	}
	// Post/redirect/get: the test leads to the log with its answer on
	// top, and loading that page again sends nothing.
	status, loc, _ := cl.post("/ui/channels/ops/test", url.Values{"_csrf": {tok}, "reason": {"check the receiver"}})
	if status != http.StatusSeeOther || !strings.HasPrefix(loc, "/ui/channels?channel=ops&tested=") {
		t.Fatalf("send test: %d %q", status, loc)
	}
	for range 2 {
		_, body = cl.get(loc)
		if !strings.Contains(body, "Test of <strong>ops</strong>: delivered, HTTP 200") || got.Load() != 1 {
			t.Fatalf("after the test: %d requests\n%s", got.Load(), body)
		}
	}
	if !strings.Contains(body, "<code>channel.test</code>") {
		t.Fatalf("the delivery log lacks the test\n%s", body)
	}
	if !strings.Contains(body, `id="verify-help"`) || strings.Contains(body, "See docs/expiry.md") {
		t.Fatal("the page does not explain how a receiver verifies a request")
	}

	pw := mustCreateUser(t, c, "vera", server.RoleViewer)
	viewer := newClient(t, c)
	viewer.signIn("vera", pw)
	if status, _ := viewer.get("/ui/channels"); status != http.StatusForbidden {
		t.Fatalf("a viewer got the channels page: %d", status)
	}
	if _, home := viewer.get("/ui/"); strings.Contains(home, `href="/ui/channels"`) {
		t.Fatal("a viewer sees the Channels link")
	}
}
