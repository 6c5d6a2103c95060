package webui_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/switchyard-io/switchyard/sdk/wire"
	"github.com/switchyard-io/switchyard/server"
)

// TestRequestPages: on a protected app, turning an L5 switch on from its
// page lands on the change request's page; the switch page and the
// navigation's badge show it waiting; the author sees no approve form and
// cannot approve by a forged one; another operator approves; the author
// applies; a break-glass without a reason names the field.
func TestRequestPages(t *testing.T) {
	c := startConsole(t)
	ctx := context.Background()
	if _, err := c.Service.SetPolicy(ctx, admin, "pay", server.PolicyInput{Protected: true, Reason: "payments"}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"writes", "ledger"} {
		if _, _, err := c.Service.CreateSwitch(ctx, admin, "pay", server.SwitchInput{Name: name, Level: wire.L5, Reason: "seed"}); err != nil {
			t.Fatal(err)
		}
	}
	ann := newClient(t, c)
	ann.signIn("ann", mustCreateUser(t, c, "ann", server.RoleOperator, "pay"))
	bob := newClient(t, c)
	bob.signIn("bob", mustCreateUser(t, c, "bob", server.RoleOperator, "pay"))

	tok := ann.csrf("/ui/apps/pay/switches/writes")
	status, loc, body := ann.post("/ui/apps/pay/switches/writes/on", url.Values{"_csrf": {tok}, "reason": {"INC-7 queue writes"}, "percent": {"100"}, "confirmed": {"yes"}})
	if status != http.StatusSeeOther || !strings.HasPrefix(loc, "/ui/requests/") {
		t.Fatalf("turn on: %d %s\n%s", status, loc, body)
	}
	if sw, _ := c.Service.GetSwitch(ctx, "pay", "writes"); sw.State != wire.StateOff {
		t.Fatal("the held change was applied")
	}
	_, page := ann.get(loc)
	if !strings.Contains(page, `id="request-diff"`) || !strings.Contains(page, `<th scope="row">state</th><td class="before" data-label="now"><code>off</code></td><td class="after" data-label="after"><code>on</code>`) {
		t.Fatalf("the request page does not show what changes\n%s", page)
	}
	if !strings.Contains(page, "Held for approval") || strings.Contains(page, `id="approve"`) || !strings.Contains(page, `id="break-glass"`) {
		t.Fatalf("the author's request page\n%s", page)
	}
	if _, sw := bob.get("/ui/apps/pay/switches/writes"); !strings.Contains(sw, `id="open-requests"`) || !strings.Contains(sw, `id="requests-badge">1<`) {
		t.Fatalf("the switch page does not show the waiting request\n%s", sw)
	}
	if st, _, _ := ann.post(loc+"/approve", url.Values{"_csrf": {tok}, "reason": {"self"}}); st != http.StatusForbidden {
		t.Fatalf("self-approval by a forged form: %d", st)
	}

	btok := bob.csrf(loc)
	if st, to, body := bob.post(loc+"/approve", url.Values{"_csrf": {btok}, "reason": {"queue depth checked"}}); st != http.StatusSeeOther || to != loc {
		t.Fatalf("approve: %d %s\n%s", st, to, body)
	}
	if st, to, body := ann.post(loc+"/apply", url.Values{"_csrf": {tok}}); st != http.StatusSeeOther || to != loc {
		t.Fatalf("apply: %d %s\n%s", st, to, body)
	}
	if sw, _ := c.Service.GetSwitch(ctx, "pay", "writes"); sw.State != wire.StateOn {
		t.Fatal("the approved change was not applied")
	}

	// Break-glass needs a reason; with one it applies at once.
	status, loc, _ = ann.post("/ui/apps/pay/switches/ledger/on", url.Values{"_csrf": {tok}, "reason": {"INC-8"}, "percent": {"100"}, "confirmed": {"yes"}})
	if status != http.StatusSeeOther {
		t.Fatalf("turn on ledger: %d", status)
	}
	if st, _, body := ann.post(loc+"/apply", url.Values{"_csrf": {tok}, "break_glass": {"yes"}, "reason": {""}}); st != http.StatusBadRequest || !strings.Contains(body, "reason") {
		t.Fatalf("break-glass without a reason: %d\n%s", st, body)
	}
	if st, _, body := ann.post(loc+"/apply", url.Values{"_csrf": {tok}, "break_glass": {"yes"}, "reason": {"INC-8 nobody awake"}}); st != http.StatusSeeOther {
		t.Fatalf("break-glass: %d\n%s", st, body)
	}
	if sw, _ := c.Service.GetSwitch(ctx, "pay", "ledger"); sw.State != wire.StateOn {
		t.Fatal("break-glass did not apply")
	}
	if _, list := bob.get("/ui/requests"); !strings.Contains(list, `id="no-requests"`) {
		t.Fatalf("requests still listed as waiting\n%s", list)
	}
}
