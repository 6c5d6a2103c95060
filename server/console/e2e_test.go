package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/internal/servertest"
	"github.com/switchyard-io/switchyard/sdk/wire"
)

// TestEndToEnd walks one switch through its life over HTTP and checks etcd
// and the audit log after every step.
func TestEndToEnd(t *testing.T) {
	e := newEnv(t)
	c := e.start()
	waitLeader(t, c)
	key := wire.SwitchKey("default", "checkout", "recommend")
	base := "/api/v1/apps/checkout/switches"

	steps := []struct {
		method, path, body string
		status             int
		wantEtcd           string // "" means the key must be gone
		action, reason     string
	}{
		{"POST", base, `{"name":"recommend","level":"L1","fallback":{"items":[]},"reason":"create for INC-1"}`, 201,
			`{"app":"checkout","name":"recommend","level":"L1","state":"off","rollout":{"percent":100,"stickiness":"instance"},"fallback":{"items":[]},"version":1}`,
			"switch.create", "create for INC-1"},
		{"POST", base + "/recommend/on", `{"reason":"recs timing out","version":1,"rollout":{"percent":50,"stickiness":"key","selector":"zone=a"}}`, 200,
			`{"app":"checkout","name":"recommend","level":"L1","state":"on","rollout":{"percent":50,"stickiness":"key","selector":"zone=a"},"fallback":{"items":[]},"version":2}`,
			"switch.on", "recs timing out"},
		{"PATCH", base + "/recommend", `{"reason":"bigger fallback","version":2,"fallback":{"items":[1]},"owner":"team-recs"}`, 200,
			`{"app":"checkout","name":"recommend","level":"L1","state":"on","rollout":{"percent":50,"stickiness":"key","selector":"zone=a"},"fallback":{"items":[1]},"version":3}`,
			"switch.update", "bigger fallback"},
		{"POST", base + "/recommend/off", `{"reason":"recovered","version":3}`, 200,
			`{"app":"checkout","name":"recommend","level":"L1","state":"off","rollout":{"percent":50,"stickiness":"key","selector":"zone=a"},"fallback":{"items":[1]},"version":4}`,
			"switch.off", "recovered"},
		{"DELETE", base + "/recommend?reason=retired&version=4", "", 200, "", "switch.delete", "retired"},
	}
	for i, s := range steps {
		r := mustStatus(t, call(t, c, s.method, s.path, adminToken, s.body), s.status)
		if r.str("published") != "true" || r.num("revision") <= 0 {
			t.Fatalf("step %d (%s): not published: %s", i, s.action, r.Raw)
		}
		got := e.etcdValue(key)
		if s.wantEtcd == "" && got != "" {
			t.Fatalf("step %d: key still in etcd: %s", i, got)
		}
		if s.wantEtcd != "" {
			var w wire.Switch
			if err := json.Unmarshal([]byte(got), &w); err != nil {
				t.Fatalf("step %d: etcd value %q: %v", i, got, err)
			}
			w.ExpiresAt = nil // time-dependent; checked below
			b, _ := json.Marshal(w)
			if !jsonEq(string(b), s.wantEtcd) {
				t.Fatalf("step %d: etcd holds\n %s\nwant\n %s", i, b, s.wantEtcd)
			}
		}
		events, _, err := audit.List(context.Background(), c.DB, audit.Filter{Target: "switch/checkout/recommend"})
		if err != nil {
			t.Fatal(err)
		}
		if len(events) != i+1 || string(events[0].Action) != s.action || events[0].Reason != s.reason || events[0].Actor != "token:bootstrap#1" {
			t.Fatalf("step %d: audit has %d events, newest %+v", i, len(events), events[0])
		}
	}
	res := mustStatus(t, call(t, c, "GET", "/api/v1/audit/verify", adminToken, ""), 200)
	if res.str("ok") != "true" {
		t.Fatalf("verify: %s", res.Raw)
	}
	list := mustStatus(t, call(t, c, "GET", "/api/v1/audit?target=switch/checkout/recommend&limit=2", adminToken, ""), 200)
	if n := len(list.Body["events"].([]any)); n != 2 || list.str("next_cursor") == "" {
		t.Fatalf("audit paging: %s", list.Raw)
	}
}

func TestInstancesAndProbes(t *testing.T) {
	e := newEnv(t)
	c := e.start()
	r := mustStatus(t, call(t, c, "GET", "/api/v1/apps/checkout/instances", adminToken, ""), 200)
	if r.str("instances") != "[]" {
		t.Fatalf("instances before any SDK: %s", r.Raw)
	}
	inst := wire.Instance{App: "checkout", InstanceID: "pod-1", Labels: map[string]string{"zone": "a"}, SDKVersion: "test", AppliedRevision: 7}
	b, _ := json.Marshal(inst)
	if _, err := e.cli.Put(context.Background(), wire.InstanceKey("default", "checkout", "pod-1"), string(b)); err != nil {
		t.Fatal(err)
	}
	// The fleet model follows etcd's watch: the instance shows within moments.
	servertest.Eventually(t, 5*time.Second, "the instance in the API", func() bool {
		r = mustStatus(t, call(t, c, "GET", "/api/v1/apps/checkout/instances", adminToken, ""), 200)
		return strings.Contains(r.Raw, `"instance_id":"pod-1"`) && strings.Contains(r.Raw, `"applied_revision":7`) && r.str("synced") == "true"
	})
	// The authentication scheme is case-insensitive; a token without it is not one.
	mustStatus(t, call(t, c, "GET", "/api/v1/switches", "", "", "Authorization", "bearer "+adminToken), 200)
	mustStatus(t, call(t, c, "GET", "/api/v1/switches", "", "", "Authorization", adminToken), 401)
	mustStatus(t, call(t, c, "GET", "/healthz", "", ""), 200)
	mustStatus(t, call(t, c, "GET", "/readyz", "", ""), 200)
	waitLeader(t, c)
	call(t, c, "GET", "/api/v1/apps/checkout/switches", adminToken, "")
	m := mustStatus(t, call(t, c, "GET", "/metrics", "", ""), 200)
	for _, name := range []string{"switchyard_http_requests_total", "switchyard_http_request_duration_seconds", "switchyard_publish_lag_seconds", "switchyard_outbox_depth", "switchyard_reconciler_repairs_total", "switchyard_leader 1"} {
		if !strings.Contains(m.Raw, name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	e.etcd.Stop()
	r = call(t, c, "GET", "/readyz", "", "")
	if r.Status != 503 || r.str("etcd") != "unreachable" || r.str("database") != "ok" {
		t.Fatalf("readyz with etcd down: %d %s", r.Status, r.Raw)
	}
	// With etcd down the fleet shows what it last knew, and says so.
	servertest.Eventually(t, 10*time.Second, "the instances say they are out of sync", func() bool {
		r = call(t, c, "GET", "/api/v1/apps/checkout/instances", adminToken, "")
		return r.Status == 200 && r.str("synced") == "false" && strings.Contains(r.Raw, `"instance_id":"pod-1"`)
	})
}

// TestConcurrentFlips: 50 goroutines flip one switch with versions; every
// success bumps the version by exactly one and the rest get 409.
func TestConcurrentFlips(t *testing.T) {
	e := newEnv(t)
	c := e.start()
	waitLeader(t, c)
	mustStatus(t, call(t, c, "POST", "/api/v1/apps/checkout/switches", adminToken, `{"name":"flip","level":"L3","reason":"seed"}`), 201)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		versions = map[float64]bool{}
		ok, lost int
	)
	for g := 0; g < 50; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			cur := call(t, c, "GET", "/api/v1/apps/checkout/switches/flip", adminToken, "")
			v := cur.num("switch", "version")
			op := "on"
			if g%2 == 0 {
				op = "off"
			}
			r := call(t, c, "POST", "/api/v1/apps/checkout/switches/flip/"+op, adminToken, fmt.Sprintf(`{"reason":"flip %d","version":%d}`, g, int(v)))
			mu.Lock()
			defer mu.Unlock()
			switch r.Status {
			case 200:
				ok++
				nv := r.num("switch", "version")
				if nv != v+1 || versions[nv] {
					t.Errorf("success moved version %v → %v (seen before: %v)", v, nv, versions[nv])
				}
				versions[nv] = true
			case 409:
				lost++
			default:
				t.Errorf("unexpected %d: %s", r.Status, r.Raw)
			}
		}(g)
	}
	wg.Wait()
	final := call(t, c, "GET", "/api/v1/apps/checkout/switches/flip", adminToken, "")
	if got := final.num("switch", "version"); int(got) != 1+ok || ok+lost != 50 || ok == 0 {
		t.Fatalf("final version %v after %d successes and %d conflicts", got, ok, lost)
	}
	events, _, _ := audit.List(context.Background(), c.DB, audit.Filter{Target: "switch/checkout/flip", Limit: 1000})
	if len(events) != 1+ok {
		t.Fatalf("%d audit events for %d changes", len(events), 1+ok)
	}
	if res, err := audit.Verify(context.Background(), c.DB); err != nil || !res.OK() {
		t.Fatalf("verify: %+v %v", res, err)
	}
	var w wire.Switch
	servertest.Eventually(t, 5*time.Second, "etcd holds the final version", func() bool {
		_ = json.Unmarshal([]byte(e.etcdValue(wire.SwitchKey("default", "checkout", "flip"))), &w)
		return w.Version == int64(1+ok)
	})
}

func TestLimitRulesPublished(t *testing.T) {
	e := newEnv(t)
	c := e.start()
	waitLeader(t, c)
	res := url.PathEscape("POST /orders")
	key := wire.LimitKey("default", "checkout", "POST /orders")
	mustStatus(t, call(t, c, "POST", "/api/v1/apps/checkout/limits", adminToken,
		`{"resource":"POST /orders","kind":"gcra","rate":50,"max_wait":"100ms","mode":"shadow","reason":"protect"}`), 201)
	rule, err := wire.DecodeLimitRule([]byte(e.etcdValue(key)))
	if err != nil || rule.Kind != wire.KindGCRA || rule.Mode != wire.ModeShadow || rule.MaxWait.D() != 100*time.Millisecond {
		t.Fatalf("published rule %+v %v", rule, err)
	}
	mustStatus(t, call(t, c, "PATCH", "/api/v1/apps/checkout/limits/"+res, adminToken, `{"reason":"enforce","mode":"enforce","version":1}`), 200)
	if rule, _ = wire.DecodeLimitRule([]byte(e.etcdValue(key))); rule.Mode != wire.ModeEnforce || rule.Version != 2 {
		t.Fatalf("after patch %+v", rule)
	}
	mustStatus(t, call(t, c, "POST", "/api/v1/apps/checkout/limits/"+res+"/off", adminToken, `{"reason":"withdraw"}`), 200)
	if v := e.etcdValue(key); v != "" {
		t.Fatalf("rule off but still in etcd: %s", v)
	}
	mustStatus(t, call(t, c, "POST", "/api/v1/apps/checkout/limits/"+res+"/on", adminToken, `{"reason":"back"}`), 200)
	if v := e.etcdValue(key); v == "" {
		t.Fatal("rule on but not in etcd")
	}
	mustStatus(t, call(t, c, "DELETE", "/api/v1/apps/checkout/limits/"+res, adminToken, `{"reason":"done"}`), 200)
	if v := e.etcdValue(key); v != "" {
		t.Fatalf("deleted rule still in etcd: %s", v)
	}
}

// TestAuditAddressNotSpoofable: without configured proxies a client's
// X-Forwarded-For does not change the address the audit log records.
func TestAuditAddressNotSpoofable(t *testing.T) {
	e := newEnv(t)
	c := e.start()
	mustStatus(t, call(t, c, "POST", "/api/v1/apps/checkout/switches", adminToken,
		`{"name":"addr","level":"L3","reason":"who am I"}`, "X-Forwarded-For", "203.0.113.9"), 201)
	events, _, err := audit.List(context.Background(), c.DB, audit.Filter{Target: "switch/checkout/addr"})
	if err != nil || len(events) != 1 {
		t.Fatalf("events %v %v", events, err)
	}
	if events[0].RemoteAddr != "127.0.0.1" {
		t.Fatalf("audit recorded %q, want the real peer 127.0.0.1", events[0].RemoteAddr)
	}
}

// TestListPaging: switch and limit lists come in pages of `limit`, ordered
// by app and name, each page but the last naming the cursor of the next
// (next_cursor); the cursor works across apps and for resources holding a
// slash.
func TestListPaging(t *testing.T) {
	e := newEnv(t)
	c := e.start()
	for _, s := range []string{"checkout/c", "checkout/a", "payments/a", "checkout/b", "search/z"} {
		app, name, _ := strings.Cut(s, "/")
		mustStatus(t, call(t, c, "POST", "/api/v1/apps/"+app+"/switches", adminToken, `{"name":"`+name+`","level":"L3","reason":"seed"}`), 201)
	}
	for _, res := range []string{"POST /orders", "GET /orders", "GET /orders/{id}"} {
		mustStatus(t, call(t, c, "POST", "/api/v1/apps/checkout/limits", adminToken, `{"resource":"`+res+`","kind":"concurrency","max":4,"reason":"seed"}`), 201)
	}
	// pages follows next_cursor from path and returns every page's entries.
	pages := func(path, key, field string) [][]string {
		t.Helper()
		var out [][]string
		cursor := ""
		for {
			r := mustStatus(t, call(t, c, "GET", path+"&cursor="+url.QueryEscape(cursor), adminToken, ""), 200)
			var body map[string][]map[string]any
			_ = json.Unmarshal([]byte(r.Raw), &body)
			var page []string
			for _, item := range body[key] {
				page = append(page, fmt.Sprint(item["app"], "/", item[field]))
			}
			out = append(out, page)
			if cursor = r.str("next_cursor"); cursor == "" {
				return out
			}
		}
	}
	if got := fmt.Sprint(pages("/api/v1/switches?limit=2", "switches", "name")); got != "[[checkout/a checkout/b] [checkout/c payments/a] [search/z]]" {
		t.Fatalf("all switches: %s", got)
	}
	if got := fmt.Sprint(pages("/api/v1/apps/checkout/switches?limit=3", "switches", "name")); got != "[[checkout/a checkout/b checkout/c]]" {
		t.Fatalf("checkout switches: %s", got)
	}
	if got := fmt.Sprint(pages("/api/v1/apps/checkout/limits?limit=1", "limits", "resource")); got != "[[checkout/GET /orders] [checkout/GET /orders/{id}] [checkout/POST /orders]]" {
		t.Fatalf("checkout limits: %s", got)
	}
	r := mustStatus(t, call(t, c, "GET", "/api/v1/apps/checkout/switches?limit=0", adminToken, ""), 400)
	if r.str("field") != "limit" {
		t.Fatalf("bad limit: %s", r.Raw)
	}
}
