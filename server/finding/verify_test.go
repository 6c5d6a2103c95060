package finding_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/internal/etcdtest"
	"github.com/switchyard-io/switchyard/internal/pgtest"
	"github.com/switchyard-io/switchyard/internal/servertest"
	"github.com/switchyard-io/switchyard/sdk"
	"github.com/switchyard-io/switchyard/sdk/wire"
	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/finding"
	"github.com/switchyard-io/switchyard/server/fleet"
)

// livePage is the product page's live answer.
const livePage = `{"id":"7","currency":"EUR","recommendations":[{"sku":"socks","price":3}]}`

// TestFallbackMismatchFinding is the demo of shadow verification end to
// end, on a real etcd, Postgres and SDK: a service lists its L1 switch in
// the middleware's Verify option while the switch is off. Its fallback
// lost the required field /currency: within two sample periods the
// console's fleet model shows the mismatch and the findings job opens
// fallback_mismatch naming the path, while every caller got the live
// answer byte for byte. Once the fallback is fixed, the next samples
// match, the finding resolves and the switch shows as verified.
func TestFallbackMismatchFinding(t *testing.T) {
	const ns, app, period = "default", "checkout", 2 * time.Second
	ctx := context.Background()
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	db := servertest.OpenDB(t, pgtest.NewDatabase(t), t.TempDir())
	svc := server.NewService(db, nil)
	term := server.Term{Rev: 7, Holder: "test"}
	if err := svc.ClaimTerm(ctx, term); err != nil {
		t.Fatal(err)
	}
	admin := server.Actor{Name: "token:admin", Kind: audit.ActorToken, Role: server.RoleAdmin}
	verify := &wire.Verify{Every: wire.Duration(period), RequiredFields: []string{"/currency"}}
	sw, _, err := svc.CreateSwitch(ctx, admin, app, server.SwitchInput{Name: "recs", Level: wire.L1, Owner: "team-recs",
		Fallback: json.RawMessage(`{"recommendations":[]}`), Verify: verify, Reason: "seed"})
	if err != nil {
		t.Fatal(err)
	}
	publish := func(sw *server.Switch) {
		t.Helper()
		b, _ := json.Marshal(sw.Wire())
		if _, err := cli.Put(ctx, wire.SwitchKey(ns, app, sw.Name), string(b)); err != nil {
			t.Fatal(err)
		}
	}
	publish(sw) // the test stands in for the console's publisher

	m := fleet.New(fleet.Config{Namespace: ns})
	runCtx, stop := context.WithCancel(ctx)
	modelDone := make(chan struct{})
	go func() { defer close(modelDone); m.Run(runCtx, cli) }()
	t.Cleanup(func() { stop(); <-modelDone })
	job := finding.NewJob(svc, finding.JobConfig{Fleet: m})

	c, err := sdk.New(ctx, sdk.Config{Endpoints: []string{etcd.Endpoint}, Namespace: ns, App: app, InstanceID: "inst-1",
		ReportInterval: time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	recs := c.Switch("recs")
	mux := http.NewServeMux()
	mux.HandleFunc("GET /products/{id}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if !recs.On(r.Context()) {
			io.WriteString(w, livePage)
			return
		}
		var fb json.RawMessage
		if err := recs.Fallback(&fb); err != nil {
			http.Error(w, "no fallback", http.StatusInternalServerError)
			return
		}
		io.WriteString(w, `{"id":"`+r.PathValue("id")+`",`+string(fb[1:]))
	})
	srv := httptest.NewServer(c.Middleware(sdk.MiddlewareOptions{Verify: []*sdk.Handle{recs}})(mux))
	t.Cleanup(srv.Close)
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := c.WaitReady(wctx); err != nil {
		t.Fatal(err)
	}

	// Callers: a request every 20 ms, each answer checked byte for byte.
	var (
		mu      sync.Mutex
		answers int
		wrong   []string
	)
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			case <-time.After(20 * time.Millisecond):
			}
			res, err := http.Get(srv.URL + "/products/7")
			if err != nil {
				continue
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			mu.Lock()
			answers++
			if res.StatusCode != http.StatusOK || string(body) != livePage {
				wrong = append(wrong, string(body))
			}
			mu.Unlock()
		}
	}()
	t.Cleanup(func() { close(quit); <-done })

	openMismatch := func() []finding.Finding {
		t.Helper()
		if err := job.Step(ctx, term, time.Now()); err != nil {
			t.Fatal(err)
		}
		list, err := finding.List(db, finding.Filter{Kind: finding.FallbackMismatch, Target: "switch/checkout/recs", Open: true})
		if err != nil {
			t.Fatal(err)
		}
		return list
	}
	start := time.Now()
	var open []finding.Finding
	servertest.Eventually(t, 30*time.Second, "fallback_mismatch opens", func() bool { open = openMismatch(); return len(open) == 1 })
	took := time.Since(start)
	t.Logf("fallback_mismatch after %v: %s", took.Round(time.Millisecond), open[0].Summary)
	if took > 2*period {
		t.Errorf("the finding took %v, more than two sample periods (%v)", took, 2*period)
	}
	if !strings.Contains(open[0].Summary, "/currency: required, missing") {
		t.Errorf("finding does not name the missing path: %q / %q", open[0].Summary, open[0].Detail)
	}
	if strings.Contains(open[0].Detail, "EUR") || strings.Contains(open[0].Detail, "socks") {
		t.Errorf("finding leaks answer values: %q", open[0].Detail)
	}

	// The fallback is fixed: the next samples match and the finding resolves.
	fixed := json.RawMessage(`{"currency":"EUR","recommendations":[]}`)
	sw, _, err = svc.PatchSwitch(ctx, admin, app, "recs", server.SwitchPatch{Fallback: &fixed, Reason: "restore currency"})
	if err != nil {
		t.Fatal(err)
	}
	publish(sw)
	servertest.Eventually(t, 30*time.Second, "fallback_mismatch resolves", func() bool { return len(openMismatch()) == 0 })
	v := m.Switch(app, "recs").Verification
	if v == nil || v.Verified != 1 || v.Instances != 1 || v.LastMatch == nil {
		t.Fatalf("fleet verification after the fix: %+v", v)
	}
	// Rollout gates and triggers read the share through the fleet source.
	sample, err := m.Source(app).Query(ctx, `verify_match_share{switch="recs"}`, time.Now())
	if share, ok := v.MatchShare(); !ok || err != nil || !sample.OK || sample.Value != share || share <= 0 || share >= 1 {
		t.Errorf("verify_match_share %+v (%v), view %v; want one share between the mismatches and the matches", sample, err, share)
	}

	mu.Lock()
	defer mu.Unlock()
	if answers == 0 || len(wrong) > 0 {
		t.Errorf("%d answers, %d not the live answer: %q", answers, len(wrong), wrong)
	}
	sig := m.Switch(app, "recs")
	if sig.DegradedRate != 0 || sig.FallbackRate != 0 {
		t.Errorf("shadow runs counted as degraded answers: %+v", sig)
	}
}
