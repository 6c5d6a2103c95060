package webui_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/switchyard-io/switchyard/sdk/wire"
)

// TestLimitEditorOffersOverloadLevers: the limit editor offers the
// throttle and system kinds and the CoDel, priority and warm-up options,
// marks a bad value at its input, and saves a good rule.
func TestLimitEditorOffersOverloadLevers(t *testing.T) {
	c := startConsole(t)
	cl := newClient(t, c)
	cl.signIn("admin", bootstrapToken)
	tok := cl.csrf("/ui/")

	_, body := cl.get("/ui/limits/edit?app=checkout")
	for _, want := range []string{"<option >throttle</option>", "<option >system</option>", `name="throttle.k"`, `name="system.cpu"`,
		`name="concurrency.queue_target"`, `name="concurrency.lifo"`, `name="concurrency.reserve"`, `name="token_bucket.warm_up"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the editor lacks %s", want)
		}
	}

	status, _, body := cl.post("/ui/limits/save", url.Values{"_csrf": {tok}, "app": {"checkout"}, "resource": {"payments-api"}, "kind": {"throttle"},
		"throttle.k": {"20"}, "mode": {"enforce"}, "scope": {"instance"}, "reason": {"protect payments"}})
	if status != http.StatusBadRequest || !fieldErr("throttle.k", "K (accepts multiplier, 1–10)", "must be between 1 and 10 (2 lets the backend refuse up to half the requests before any is throttled)").MatchString(body) {
		t.Fatalf("k=20: %d, want 400 with the error under K\n%s", status, body)
	}
	status, _, body = cl.post("/ui/limits/save", url.Values{"_csrf": {tok}, "app": {"checkout"}, "resource": {"POST /export"}, "kind": {"concurrency"},
		"concurrency.max": {"8"}, "concurrency.queue_target": {"5ms"}, "concurrency.lifo": {"true"}, "concurrency.reserve": {"0.2"},
		"mode": {"enforce"}, "scope": {"instance"}, "reason": {"queue by delay"}})
	if status >= 400 {
		t.Fatalf("good CoDel rule: %d\n%s", status, body)
	}
	r, err := c.Service.GetLimit(context.Background(), "checkout", "POST /export")
	if err != nil {
		t.Fatal(err)
	}
	if w := r.Wire(); w.QueueTarget != wire.Duration(5e6) || !w.LIFO || w.Reserve != 0.2 {
		t.Fatalf("stored %+v, want queue_target 5ms, lifo, reserve 0.2", w.Overload)
	}
}
