package webui_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/servertest"
	"github.com/switchyard-io/switchyard/sdk"
	"github.com/switchyard-io/switchyard/sdk/wire"
	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/console"
	"github.com/switchyard-io/switchyard/server/webui"
)

// TestSwitchPageFallbackVerification: an SDK instance verifies the off L1
// switch "recs" through its middleware; the switch page says the fallback
// was verified on 1/1 instances, and after a change that turns a field of
// the fallback into another type it names that path instead.
func TestSwitchPageFallbackVerification(t *testing.T) {
	var etcdEndpoint string
	c := startConsoleWith(t, webui.Options{Clock: fastClock{}}, func(cfg *console.Config) { etcdEndpoint = cfg.EtcdEndpoints[0] })
	ctx := context.Background()
	verify := &wire.Verify{Every: wire.Duration(time.Second)}
	sw, _, err := c.Service.CreateSwitch(ctx, admin, "checkout", server.SwitchInput{Name: "recs", Level: wire.L1,
		Fallback: json.RawMessage(`{"items":[],"currency":"EUR"}`), Verify: verify, Reason: "seed"})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := sdk.New(ctx, sdk.Config{Endpoints: []string{etcdEndpoint}, App: "checkout", InstanceID: "web-1",
		ReportInterval: time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	recs := cl.Switch("recs")
	page := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var fb json.RawMessage
		if recs.On(r.Context()) && recs.Fallback(&fb) == nil {
			w.Write(fb)
			return
		}
		io.WriteString(w, `{"items":[{"sku":"socks"}],"currency":"EUR"}`)
	})
	srv := httptest.NewServer(cl.Middleware(sdk.MiddlewareOptions{Verify: []*sdk.Handle{recs}})(page))
	t.Cleanup(srv.Close)
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			case <-time.After(50 * time.Millisecond):
			}
			if res, err := http.Get(srv.URL + "/products/7"); err == nil {
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
			}
		}
	}()
	t.Cleanup(func() { close(quit); <-done })

	web := newClient(t, c)
	web.signIn("admin", bootstrapToken)
	pageHas := func(want string) func() bool {
		return func() bool {
			_, body := web.get("/ui/apps/checkout/switches/recs")
			return strings.Contains(body, want)
		}
	}
	servertest.Eventually(t, 30*time.Second, "the page says the fallback is verified", pageHas("on 1/1 instances"))
	// The currency turns into a number (a patch merges into the stored
	// fallback, so a member is changed rather than left out).
	broken := json.RawMessage(`{"items":[],"currency":7}`)
	if _, _, err := c.Service.PatchSwitch(ctx, admin, "checkout", "recs", server.SwitchPatch{Fallback: &broken, Version: &sw.Version, Reason: "currency as a number"}); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, 30*time.Second, "the page names the differing path", pageHas("/currency: string, degraded number"))
}
