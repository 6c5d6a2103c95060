package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/agent"
	"github.com/switchyard-io/switchyard/server/drill"
)

// startAgentService runs an agent for app and a service that, like a
// non-Go process, asks the agent over OFREP whether "recommend" is on for
// each request and serves the switch's fallback companion when it is. It
// sends the service a request every 20 ms until the test ends and returns
// its URL.
func startAgentService(t *testing.T, e *env, app string) string {
	t.Helper()
	cfg := agent.DefaultConfig()
	cfg.App, cfg.EtcdEndpoints, cfg.InstanceID = app, []string{e.etcd.Endpoint}, app+"-agent"
	cfg.SnapshotDir, cfg.ReportInterval = t.TempDir(), time.Second
	a, err := agent.New(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ofrep := httptest.NewServer(a.OFREPHandler())
	t.Cleanup(func() { ofrep.Close(); a.Close() })

	evaluate := func(r *http.Request, flag string) (value json.RawMessage) {
		body := []byte(`{"context":{"targetingKey":"` + r.URL.Query().Get("user") + `"}}`)
		res, err := http.Post(ofrep.URL+"/ofrep/v1/evaluate/flags/"+flag, "application/json", bytes.NewReader(body))
		if err != nil {
			return nil
		}
		defer res.Body.Close()
		var ans struct{ Value json.RawMessage }
		_ = json.NewDecoder(res.Body).Decode(&ans)
		return ans.Value
	}
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if string(evaluate(r, "recommend")) != "true" {
			_, _ = io.WriteString(w, `{"items":[{"id":"a1","title":"Lamp"}],"source":"live"}`)
			return
		}
		_, _ = w.Write(evaluate(r, "recommend"+agent.FallbackSuffix))
	}))
	t.Cleanup(svc.Close)

	keepCalling(t, svc.URL+"/recommendations?user=u1")
	e.allowEgress(svc.Listener.Addr().String())
	return svc.URL + "/recommendations"
}

// TestDrillWithAgent: an agent is an instance of its app whose reads are
// the reads of the processes it serves. A drill of a switch that a service
// reads through the agent's OFREP API passes every check: the agent applied
// the override and its degraded counter rose with the service's checks.
func TestDrillWithAgent(t *testing.T) {
	e := newEnv(t)
	c := e.start(steadyLeader)
	waitLeader(t, c)
	const app = "shop-agent"
	url := startAgentService(t, e, app)
	// As seedDrill, with a p99 bound for a degraded path that asks the agent
	// twice over loopback: this test is about the agent's signals, and
	// "fast" must not depend on how busy the test machine is.
	mustStatus(t, call(t, c, "POST", "/api/v1/apps/"+app+"/switches", adminToken,
		`{"name":"recommend","level":"L1","fallback":{"items":[],"source":"fallback"},"reason":"seed"}`), 201)
	mustStatus(t, call(t, c, "POST", "/api/v1/apps/"+app+"/drills", adminToken,
		`{"name":"reco","switch":"recommend","target":{"percent":100},"duration":"8s","recover_within":"30s",`+
			`"probes":[{"url":"`+url+`","required_fields":["/items","/source"],"requests":20,"max_p99":"1s"}],"reason":"monthly drill"}`), 201)
	waitInstances(t, c, app, 1)

	mustStatus(t, call(t, c, "POST", "/api/v1/apps/"+app+"/drills/reco/runs", adminToken, `{"reason":"drill through the agent"}`), 202)
	run := waitRun(t, c, app, 1, 60*time.Second)
	logVerdicts(t, run)
	if run.Outcome != drill.OutcomePassed {
		t.Fatalf("drill through an agent: %s (%s)", run.Outcome, run.Summary)
	}
	ev := run.Progress.Instances[app+"-agent"]
	if ev == nil || !ev.Targeted || ev.RoseAfterMS == nil || *ev.RoseAfterMS > 5000 {
		t.Errorf("the agent's evidence: %+v", ev)
	}
}
