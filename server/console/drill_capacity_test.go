package console_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/servertest"
	"github.com/switchyard-io/switchyard/sdk"
	"github.com/switchyard-io/switchyard/server/drill"
)

// startBackendCaller starts one SDK instance of app serving
// GET /recommendations behind the middleware of switch "recommend". Its
// live path calls a backend, counted by the shadow-mode limit rule
// "recs-backend" (the fleet's allowed_rate); its fallback does not when
// spares is true, and still calls it when it is false.
func startBackendCaller(t *testing.T, e *env, app string, spares bool) string {
	t.Helper()
	c, err := sdk.New(context.Background(), sdk.Config{Endpoints: []string{e.etcd.Endpoint}, Namespace: "default", App: app,
		InstanceID: app + "-0", ReportInterval: time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	backend := c.Limiter("recs-backend")
	h := c.Switch("recommend")
	serve := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if sdk.DegradedLevel(r.Context()) == "" || !spares {
			backend.Allow(r.Context()) // the call to the backend
		}
		if sdk.DegradedLevel(r.Context()) != "" {
			_, _ = io.WriteString(w, `{"items":[],"source":"fallback"}`)
			return
		}
		_, _ = io.WriteString(w, `{"items":[{"id":"a1"}],"source":"live"}`)
	})
	srv := httptest.NewServer(c.Middleware(sdk.MiddlewareOptions{Switches: []*sdk.Handle{h}})(serve))
	t.Cleanup(srv.Close)
	e.allowEgress(srv.Listener.Addr().String())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	url := srv.URL + "/recommendations"
	keepCalling(t, url)
	return url
}

// TestDrillCapacity: a drill with a capacity check on the backend calls
// the degradation should spare passes when the fallback stops calling the
// backend, and fails, naming both loads, when the fallback still calls it.
func TestDrillCapacity(t *testing.T) {
	e := newEnv(t)
	c := e.start(steadyLeader)
	waitLeader(t, c)
	capacity := `,"capacity":{"source":"fleet","query":"allowed_rate{limit=\"recs-backend\"}","min_drop":0.5}`
	apps := map[string]bool{"cap-spares": true, "cap-calls": false}
	for app, spares := range apps {
		mustStatus(t, call(t, c, "POST", "/api/v1/apps/"+app+"/limits", adminToken,
			`{"resource":"recs-backend","kind":"token_bucket","rate":100000,"burst":100000,"mode":"shadow","reason":"count backend calls"}`), 201)
		url := startBackendCaller(t, e, app, spares)
		seedDrill(t, c, app, url, capacity)
		waitInstances(t, c, app, 1)
		// The baseline needs a load: wait until the fleet has a rate.
		servertest.Eventually(t, 20*time.Second, app+" reports backend calls", func() bool {
			for _, in := range c.Fleet.Instances(app) {
				for _, l := range in.Limits {
					if l.Resource == "recs-backend" && l.AllowedRate > 0 {
						return true
					}
				}
			}
			return false
		})
	}
	for app := range apps {
		mustStatus(t, call(t, c, "POST", "/api/v1/apps/"+app+"/drills/reco/runs", adminToken, `{"reason":"capacity drill"}`), 202)
	}
	for app, spares := range apps {
		v := waitRun(t, c, app, 1, 60*time.Second)
		logVerdicts(t, v)
		fc := v.Progress.Verdicts.FreesCapacity
		if fc == nil {
			t.Fatalf("%s: no capacity verdict (%s: %s)", app, v.Outcome, v.Summary)
		}
		t.Logf("%s: frees capacity %s — %s", app, fc.Result, fc.Summary)
		before, during := v.Progress.LoadBefore, v.Progress.LoadDegraded
		if before == nil || before.Value == nil || *before.Value <= 0 || during == nil || during.Value == nil {
			t.Fatalf("%s: loads before %v, degraded %v", app, before, during)
		}
		if spares {
			if fc.Result != drill.Pass || *during.Value > *before.Value/2 || v.Outcome != drill.OutcomePassed {
				t.Errorf("%s: %s %q, outcome %s; want a pass", app, fc.Result, fc.Summary, v.Outcome)
			}
			continue
		}
		if fc.Result != drill.Fail || v.Outcome != drill.OutcomeFailed ||
			!strings.Contains(fc.Summary, before.String()) || !strings.Contains(fc.Summary, during.String()) {
			t.Errorf("%s: %s %q, outcome %s; want a fail naming %s and %s", app, fc.Result, fc.Summary, v.Outcome, before, during)
		}
		md := mustStatus(t, call(t, c, "GET", "/api/v1/apps/"+app+"/drills/reco/runs/1/report.md", adminToken, ""), 200)
		if !strings.Contains(md.Raw, "| frees capacity | fail |") {
			t.Errorf("%s: markdown report without the capacity verdict:\n%s", app, md.Raw)
		}
	}
}
