package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-io/switchyard/sdk/wire"
)

// TestDashboardQueriesExistingMetrics parses the shipped Grafana dashboard
// and checks that every SDK metric it queries is exported once the SDK has
// enforced rules and served degraded requests, so a renamed metric cannot
// leave a silently empty panel.
func TestDashboardQueriesExistingMetrics(t *testing.T) {
	raw, err := os.ReadFile("../deploy/grafana/dashboards/switchyard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		UID    string `json:"uid"`
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("dashboard is not valid JSON: %v", err)
	}

	reg := prometheus.NewRegistry()
	c, err := New(context.Background(), Config{Namespace: "dash", App: "checkout", InstanceID: "i-1", Logger: discard, Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var ups []kvUpdate
	add := func(key string, v any) {
		ups = append(ups, kvUpdate{key: key, value: []byte(mustJSON(t, v)), modRev: int64(len(ups) + 1)})
	}
	ro := mkSwitch("checkout", "db-readonly", wire.StateOn, 100)
	ro.Level = wire.L4
	add(wire.SwitchKey("dash", "checkout", ro.Name), ro)
	br := rule("payments", wire.KindBreaker)
	br.ErrorRate, br.MinRequests, br.Window, br.OpenDuration, br.HalfOpenProbes = 0.5, 1, wire.Duration(time.Minute), wire.Duration(time.Minute), 1
	ad := rule("inference", wire.KindAdaptive)
	ad.Min, ad.Max = 2, 10
	tb := rule("POST /orders", wire.KindTokenBucket)
	tb.Rate, tb.Burst = 0.01, 1
	for _, r := range []wire.LimitRule{br, ad, tb} {
		add(wire.LimitKey("dash", "checkout", r.Resource), r)
	}
	c.apply(ups, true, int64(len(ups)), SourceLive)

	ctx := context.Background()
	_ = c.Limiter("payments").Do(ctx, func(context.Context) error { return errors.New("down") })
	p, _ := c.Limiter("inference").Admit(ctx)
	defer p.Release()
	h := c.Middleware(MiddlewareOptions{Switches: []*Handle{c.Switch("db-readonly")}})(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for _, m := range []string{"GET", "POST", "POST"} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(m, "/orders", nil))
	}
	c.enforcement().metrics.normal.Observe(0.001)

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, mf := range mfs {
		have[mf.GetName()] = true
	}
	metric := regexp.MustCompile(`switchyard_[a-z_]+`)
	queried := 0
	for _, p := range dash.Panels {
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			for _, name := range metric.FindAllString(tg.Expr, -1) {
				queried++
				base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")
				if !have[name] && !have[base] {
					t.Errorf("panel %q queries %s, which the SDK does not export", p.Title, name)
				}
			}
		}
	}
	if queried < 10 || dash.UID == "" {
		t.Errorf("dashboard queries %d metrics (uid %q)", queried, dash.UID)
	}
}
