package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"

	"github.com/switchyard-io/switchyard/internal/etcdtest"
	"github.com/switchyard-io/switchyard/internal/servertest"
	"github.com/switchyard-io/switchyard/sdk/wire"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, etcdtest.LeakOptions()...)
}

const ns, app = "test", "checkout"

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// start runs an agent on endpoints (none: offline) behind a test server.
func start(t *testing.T, endpoints ...string) string {
	t.Helper()
	cfg := DefaultConfig()
	cfg.EtcdEndpoints, cfg.Namespace, cfg.App = endpoints, ns, app
	cfg.InstanceID, cfg.SnapshotDir = "host-1", t.TempDir()
	cfg.Labels = map[string]string{"zone": "a"}
	a, err := New(context.Background(), cfg, discard)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(func() { srv.Close(); a.Close() })
	return srv.URL
}

// get fetches url and decodes a JSON body into v (when v is not nil).
func get(t *testing.T, url string, v any) *http.Response {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if v != nil {
		if err := json.Unmarshal(body, v); err != nil {
			t.Fatalf("GET %s: %v in %s", url, err, body)
		}
	}
	return resp
}

func put(t *testing.T, cli *clientv3.Client, key string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, key, string(b)); err != nil {
		t.Fatal(err)
	}
}

func putSwitch(t *testing.T, cli *clientv3.Client, sw wire.Switch) {
	t.Helper()
	put(t, cli, wire.SwitchKey(ns, sw.App, sw.Name), sw)
}

func TestSwitchFlipReachesAgent(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	sw := wire.Switch{App: app, Name: "recommend", Level: wire.L1, State: wire.StateOff,
		Rollout: wire.Rollout{Percent: 100}, Fallback: json.RawMessage(`{"items":[]}`),
		MaxStaleness: wire.Duration(30 * time.Second), Version: 1}
	putSwitch(t, cli, sw)
	url := start(t, etcd.Endpoint)

	var ans switchAnswer
	servertest.Eventually(t, 10*time.Second, "the off switch", func() bool {
		get(t, url+"/v1/switches/recommend", &ans)
		return ans.Source == "live"
	})
	if ans.On {
		t.Fatalf("off switch answers on: %+v", ans)
	}
	sw.State, sw.Version = wire.StateOn, 2
	putSwitch(t, cli, sw)
	servertest.Eventually(t, 10*time.Second, "the flip", func() bool {
		get(t, url+"/v1/switches/recommend", &ans)
		return ans.On
	})
	if ans.Level != wire.L1 || string(ans.Fallback) != `{"items":[]}` || ans.MaxStaleness != "30s" || ans.Source != "live" {
		t.Errorf("answer = %+v", ans)
	}

	// A global switch and one outside this instance's selector are listed too.
	putSwitch(t, cli, wire.Switch{App: wire.GlobalApp, Name: "maintenance", Level: wire.L4, State: wire.StateOn,
		Rollout: wire.Rollout{Percent: 100, Selector: "zone=b"}, Version: 1})
	var list struct {
		Revision int64           `json:"revision"`
		Switches []switchSummary `json:"switches"`
	}
	servertest.Eventually(t, 10*time.Second, "the listing", func() bool {
		get(t, url+"/v1/switches", &list)
		return len(list.Switches) == 2
	})
	m, r := list.Switches[0], list.Switches[1]
	if m.Name != "maintenance" || m.App != wire.GlobalApp || m.State != wire.StateOn || m.On || m.Rollout.Selector != "zone=b" {
		t.Errorf("maintenance = %+v (selector zone=b must not match zone=a)", m)
	}
	if r.Name != "recommend" || !r.On || r.Level != wire.L1 || r.Source != "live" || list.Revision == 0 {
		t.Errorf("recommend = %+v, revision %d", r, list.Revision)
	}
}

// inRollout is the documented rollout hash, computed independently of the SDK.
func inRollout(name, key string, percent float64) bool {
	h := fnv.New64a()
	h.Write([]byte(app + "/" + name + "/" + key))
	return h.Sum64()%10000 < uint64(percent*100+0.5)
}

func TestPerKeyRollout(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	putSwitch(t, cli, wire.Switch{App: app, Name: "new-pricing", Level: wire.L3, State: wire.StateOn,
		Rollout: wire.Rollout{Percent: 30, Stickiness: wire.StickyKey}, Version: 1})
	url := start(t, etcd.Endpoint)
	var ans switchAnswer
	servertest.Eventually(t, 10*time.Second, "the switch", func() bool {
		get(t, url+"/v1/switches/new-pricing", &ans)
		return ans.Source == "live"
	})
	on := 0
	for i := range 100 {
		key := fmt.Sprintf("tenant-%d", i)
		get(t, url+"/v1/switches/new-pricing?key="+key, &ans)
		if want := inRollout("new-pricing", key, 30); ans.On != want {
			t.Errorf("key %s: on = %v, want %v", key, ans.On, want)
		}
		if ans.On {
			on++
		}
	}
	if on == 0 || on == 100 {
		t.Errorf("%d of 100 keys on at 30%%", on)
	}
}

func TestUnknownAndInvalidSwitch(t *testing.T) {
	url := start(t) // offline: no etcd needed
	var ans switchAnswer
	if resp := get(t, url+"/v1/switches/never-created", &ans); resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if ans.Name != "never-created" || ans.On || ans.Source != "default" || ans.Level != "" || ans.Fallback != nil {
		t.Errorf("unknown switch = %+v", ans)
	}
	var p problem
	resp := get(t, url+"/v1/switches/Bad%20Name", &p)
	if resp.StatusCode != http.StatusBadRequest || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") || p.Status != 400 {
		t.Errorf("invalid name: %d %s %+v", resp.StatusCode, resp.Header.Get("Content-Type"), p)
	}
	resp, err := http.Post(url+"/v1/switches/x", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d", resp.StatusCode)
	}
}

func TestLimits(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	rule := wire.LimitRule{App: app, Resource: "POST /orders", Kind: wire.KindTokenBucket,
		Mode: wire.ModeEnforce, Scope: wire.ScopeInstance, Rate: 100, Burst: 10, Version: 3}
	put(t, cli, wire.LimitKey(ns, app, rule.Resource), rule)
	url := start(t, etcd.Endpoint)

	var got wire.LimitRule
	servertest.Eventually(t, 10*time.Second, "the rule", func() bool {
		return get(t, url+"/v1/limits/POST%20%2Forders", &got).StatusCode == http.StatusOK
	})
	if got.Resource != "POST /orders" || got.Rate != 100 || got.Burst != 10 || got.Version != 3 {
		t.Errorf("rule = %+v", got)
	}
	var list struct {
		Limits []wire.LimitRule `json:"limits"`
	}
	get(t, url+"/v1/limits", &list)
	if len(list.Limits) != 1 || list.Limits[0].Resource != "POST /orders" {
		t.Errorf("limits = %+v", list.Limits)
	}
	for _, path := range []string{"/v1/limits/GET%20%2Fnothing", "/v1/limits/", "/v1/nothing"} {
		var p problem
		resp := get(t, url+path, &p)
		if resp.StatusCode != http.StatusNotFound || resp.Header.Get("Content-Type") != "application/problem+json" || p.Status != 404 || p.Title == "" {
			t.Errorf("%s: %d %s %+v", path, resp.StatusCode, resp.Header.Get("Content-Type"), p)
		}
	}
}

type readiness struct {
	Ready    bool  `json:"ready"`
	Live     bool  `json:"live"`
	Stale    bool  `json:"stale"`
	Revision int64 `json:"revision"`
}

func TestReadiness(t *testing.T) {
	// Offline with an empty snapshot dir: no data, not ready; still healthy.
	url := start(t)
	var rd readiness
	if resp := get(t, url+"/readyz", &rd); resp.StatusCode != http.StatusServiceUnavailable || rd.Ready || !rd.Stale {
		t.Errorf("offline readyz: %d %+v", resp.StatusCode, rd)
	}
	if resp := get(t, url+"/healthz", nil); resp.StatusCode != http.StatusOK {
		t.Errorf("healthz: %d", resp.StatusCode)
	}

	etcd := etcdtest.Start(t)
	putSwitch(t, etcd.Client(t), wire.Switch{App: app, Name: "recommend", Level: wire.L3, State: wire.StateOn,
		Rollout: wire.Rollout{Percent: 100}, Version: 1})
	url = start(t, etcd.Endpoint)
	servertest.Eventually(t, 10*time.Second, "ready", func() bool {
		return get(t, url+"/readyz", &rd).StatusCode == http.StatusOK
	})
	if !rd.Ready || !rd.Live || rd.Revision == 0 {
		t.Errorf("live readyz: %+v", rd)
	}
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(body), "switchyard_sdk_applied_revision") {
		t.Errorf("metrics lack the SDK's series:\n%.500s", body)
	}
}

// TestEtcdDownReportsStale: while etcd is down the agent keeps answering
// with the last known state, and every answer says it is stale, not live.
func TestEtcdDownReportsStale(t *testing.T) {
	etcd := etcdtest.Start(t)
	putSwitch(t, etcd.Client(t), wire.Switch{App: app, Name: "recommend", Level: wire.L3, State: wire.StateOn,
		Rollout: wire.Rollout{Percent: 100}, Version: 1})
	url := start(t, etcd.Endpoint)
	var rd readiness
	servertest.Eventually(t, 10*time.Second, "live", func() bool {
		get(t, url+"/readyz", &rd)
		return rd.Live && !rd.Stale
	})

	etcd.Stop()
	servertest.Eventually(t, 10*time.Second, "stale", func() bool {
		get(t, url+"/readyz", &rd)
		return rd.Stale
	})
	var list struct {
		Stale    bool            `json:"stale"`
		Switches []switchSummary `json:"switches"`
	}
	get(t, url+"/v1/switches", &list)
	if !list.Stale || len(list.Switches) != 1 || !list.Switches[0].On || list.Switches[0].Source != "stale" {
		t.Errorf("listing while etcd is down = %+v, want the switch on with source stale", list)
	}
	var ans switchAnswer
	if get(t, url+"/v1/switches/recommend", &ans); !ans.On || ans.Source != "stale" {
		t.Errorf("answer while etcd is down = %+v, want on with source stale", ans)
	}

	etcd.Restart()
	servertest.Eventually(t, 10*time.Second, "live again", func() bool {
		get(t, url+"/v1/switches/recommend", &ans)
		return ans.Source == "live"
	})
}
