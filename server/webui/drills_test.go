package webui_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// apiCall sends a JSON request to the console's API as the bootstrap admin.
func apiCall(t *testing.T, base, method, path, body string) int {
	t.Helper()
	req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+bootstrapToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// TestDrillPages: the switch page shows the switch's drills with their next
// run and the run-now form; a missing reason is marked at its input; run
// now (a dry run) leads to the run's page, which shows the report as it
// goes, offers it as Markdown and JSON, and ends with the preflight's
// refusal (no instance is in the slice).
func TestDrillPages(t *testing.T) {
	c := startConsole(t)
	if s := apiCall(t, c.URL(), "POST", "/api/v1/apps/checkout/switches", `{"name":"recommend","level":"L1","fallback":[],"reason":"seed"}`); s != 201 {
		t.Fatalf("switch: %d", s)
	}
	if s := apiCall(t, c.URL(), "POST", "/api/v1/apps/checkout/drills", `{"name":"monthly","switch":"recommend","schedule":"0 3 1 * *","timezone":"Europe/Berlin",`+
		`"target":{"selector":"canary=true"},"duration":"2m","probes":[{"url":"http://checkout.invalid/recommendations","required_fields":["/items"]}],"reason":"seed"}`); s != 201 {
		t.Fatalf("drill: %d", s)
	}
	cl := newClient(t, c)
	cl.signIn("admin", bootstrapToken)
	_, body := cl.get("/ui/apps/checkout/switches/recommend")
	for _, want := range []string{`id="drills"`, "monthly", "0 3 1 * *", "Europe/Berlin", "100 % where canary=true", "Next run", `id="run-monthly"`} {
		if !strings.Contains(body, want) {
			t.Fatalf("switch page lacks %q\n%s", want, body)
		}
	}
	tok := cl.csrf("/ui/apps/checkout/switches/recommend")
	status, _, body := cl.post("/ui/apps/checkout/drills/monthly/runs", url.Values{"_csrf": {tok}, "dry_run": {"yes"}})
	if status != http.StatusBadRequest || !fieldErr("reason", "Reason", "is required: say why you make this change").MatchString(body) {
		t.Fatalf("run without a reason: %d\n%s", status, body)
	}
	status, loc, _ := cl.post("/ui/apps/checkout/drills/monthly/runs", url.Values{"_csrf": {tok}, "dry_run": {"yes"}, "reason": {"check the probes"}})
	if status != http.StatusSeeOther || loc != "/ui/apps/checkout/drills/monthly/runs/1" {
		t.Fatalf("run now: %d %s", status, loc)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, body = cl.get(loc)
		if strings.Contains(body, "refused") && !strings.Contains(body, "data-drill-live") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the dry run did not end\n%s", body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, want := range []string{"Dry run #1 of monthly", "by admin", "check the probes", "no live instance of checkout is in the slice", "report.md", "drill.js", "drill version 1", "spec sha256"} {
		if !strings.Contains(body, want) {
			t.Errorf("run page lacks %q\n%s", want, body)
		}
	}
	status, md := cl.get(loc + "/report.md")
	if status != 200 || !strings.Contains(md, "# Dry run checkout/monthly #1: refused") {
		t.Errorf("markdown: %d\n%s", status, md)
	}
	if status, _ := cl.get("/ui/apps/checkout/drills/monthly/runs/9"); status != http.StatusNotFound {
		t.Errorf("unknown run: %d", status)
	}
}
