package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/etcdtest"
	"github.com/switchyard-io/switchyard/internal/servertest"
	"github.com/switchyard-io/switchyard/sdk/limit"
	"github.com/switchyard-io/switchyard/sdk/wire"
)

// startOFREP runs an agent on endpoints with mod applied to its config and
// returns the URL of its OFREP API. Everything it logs goes to logs.
func startOFREP(t *testing.T, logs io.Writer, clock limit.Clock, mod func(*Config), endpoints ...string) (*Agent, string) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.EtcdEndpoints, cfg.Namespace, cfg.App = endpoints, ns, app
	cfg.InstanceID, cfg.SnapshotDir = "host-1", t.TempDir()
	cfg.Labels = map[string]string{"zone": "a"}
	cfg.OFREPRate = 0
	if mod != nil {
		mod(&cfg)
	}
	if logs == nil {
		logs = io.Discard
	}
	a, err := newAgent(context.Background(), cfg, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})), clock)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.OFREPHandler())
	t.Cleanup(func() { srv.Close(); a.Close() })
	return a, srv.URL
}

// ofrepAnswer is any OFREP answer: success, failure or bulk.
type ofrepAnswer struct {
	Key          string         `json:"key"`
	Value        any            `json:"value"`
	Reason       string         `json:"reason"`
	Variant      string         `json:"variant"`
	Metadata     map[string]any `json:"metadata"`
	ErrorCode    string         `json:"errorCode"`
	ErrorDetails string         `json:"errorDetails"`
	Flags        []ofrepAnswer  `json:"flags"`
}

// post sends body (nil: none) with the headers in hdr (name, value, …).
func post(t *testing.T, url string, body []byte, hdr ...string) (*http.Response, ofrepAnswer) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(http.MethodPost, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var ans ofrepAnswer
	if len(raw) > 0 && strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(raw, &ans); err != nil {
			t.Fatalf("POST %s: %v in %s", url, err, raw)
		}
	}
	return resp, ans
}

func keyBody(key string) []byte { return []byte(`{"context":{"targetingKey":"` + key + `"}}`) }

// TestOFREPSingle evaluates each kind of switch through the single-flag
// endpoint and checks value, reason, variant and metadata.
func TestOFREPSingle(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	for _, sw := range []wire.Switch{
		{Name: "dark", Level: wire.L3, State: wire.StateOff, Rollout: wire.Rollout{Percent: 100}, Version: 4},
		{Name: "everyone", Level: wire.L3, State: wire.StateOn, Rollout: wire.Rollout{Percent: 100}, Version: 2},
		{Name: "half", Level: wire.L3, State: wire.StateOn, Rollout: wire.Rollout{Percent: 50, Stickiness: wire.StickyKey}, Version: 1},
		{Name: "zone-a", Level: wire.L3, State: wire.StateOn, Rollout: wire.Rollout{Percent: 100, Selector: "zone=a"}, Version: 1},
		{Name: "zone-b", Level: wire.L3, State: wire.StateOn, Rollout: wire.Rollout{Percent: 100, Selector: "zone=b"}, Version: 1},
		{Name: "recommend", Level: wire.L1, State: wire.StateOn, Rollout: wire.Rollout{Percent: 100},
			Fallback: json.RawMessage(`{"items":[],"source":"fallback"}`), Version: 7},
	} {
		sw.App = app
		putSwitch(t, cli, sw)
	}
	_, url := startOFREP(t, nil, nil, nil, etcd.Endpoint)
	flag := func(k string) string { return url + "/ofrep/v1/evaluate/flags/" + k }
	servertest.Eventually(t, 10*time.Second, "live data", func() bool {
		resp, ans := post(t, flag("recommend"), nil)
		return resp.StatusCode == 200 && ans.Metadata["source"] == "live"
	})

	for _, tc := range []struct {
		key, body       string
		value           any
		reason, variant string
	}{
		{"dark", "", false, "DISABLED", "off"},
		{"everyone", `{}`, true, "STATIC", "on"},
		{"everyone", `{"context":{}}`, true, "STATIC", "on"},
		{"everyone", `{"context":null}`, true, "STATIC", "on"},
		{"zone-a", `{"context":{"targetingKey":"u1","plan":"gold"}}`, true, "TARGETING_MATCH", "on"},
		{"zone-b", `{"context":{"targetingKey":"u1"}}`, false, "TARGETING_MATCH", "off"},
		{"recommend:fallback", "", map[string]any{"items": []any{}, "source": "fallback"}, "STATIC", "fallback"},
	} {
		var body []byte
		if tc.body != "" {
			body = []byte(tc.body)
		}
		resp, ans := post(t, flag(tc.key), body)
		if resp.StatusCode != 200 || ans.Key != tc.key || fmt.Sprint(ans.Value) != fmt.Sprint(tc.value) ||
			ans.Reason != tc.reason || ans.Variant != tc.variant {
			t.Errorf("%s %s: %d %+v, want value %v reason %s variant %s", tc.key, tc.body, resp.StatusCode, ans, tc.value, tc.reason, tc.variant)
		}
	}
	_, ans := post(t, flag("dark"), nil)
	if want := map[string]any{"level": "L3", "state": "off", "version": 4.0, "source": "live"}; fmt.Sprint(ans.Metadata) != fmt.Sprint(want) {
		t.Errorf("metadata = %v, want %v", ans.Metadata, want)
	}

	// Key stickiness: the targeting key is the rollout key.
	on := 0
	for i := range 200 {
		key := fmt.Sprintf("user-%d", i)
		_, ans := post(t, flag("half"), keyBody(key))
		if want := inRollout("half", key, 50); ans.Value != want || ans.Reason != "SPLIT" {
			t.Fatalf("key %s: %+v, want value %v reason SPLIT", key, ans, want)
		}
		if ans.Value == true {
			on++
		}
	}
	if on == 0 || on == 200 {
		t.Errorf("%d of 200 keys on at 50%%", on)
	}

	// Flags that do not exist, or have no fallback companion.
	for _, tc := range []struct{ key, details string }{
		{"never-created", `no switch "never-created" is published for app "checkout" in namespace "test"`},
		{"everyone:fallback", `switch "everyone" (level L3) has no fallback value`},
		{"Bad%20Name", `"Bad Name" is not a switch name`},
	} {
		resp, ans := post(t, flag(tc.key), nil)
		if resp.StatusCode != 404 || ans.ErrorCode != "FLAG_NOT_FOUND" || !strings.Contains(ans.ErrorDetails, tc.details) {
			t.Errorf("%s: %d %+v, want 404 FLAG_NOT_FOUND saying %q", tc.key, resp.StatusCode, ans, tc.details)
		}
	}

	// Only POST is served.
	resp, err := http.Get(flag("everyone"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET: %d", resp.StatusCode)
	}
}

// TestOFREPEnvironmentFallback: a switch never published but set in the
// agent's environment answers STATIC from the environment, as the SDK does.
func TestOFREPEnvironmentFallback(t *testing.T) {
	t.Setenv("SWITCHYARD_SWITCH_CHECKOUT_FROM_ENV", "on")
	_, url := startOFREP(t, nil, nil, nil)
	resp, ans := post(t, url+"/ofrep/v1/evaluate/flags/from-env", nil)
	if resp.StatusCode != 200 || ans.Value != true || ans.Reason != "STATIC" || ans.Metadata["source"] != "env" {
		t.Errorf("environment switch: %d %+v", resp.StatusCode, ans)
	}
}

// TestOFREPBadInput: every client mistake answers its code with details a
// person can act on, and nothing is logged above debug level.
func TestOFREPBadInput(t *testing.T) {
	var logs bytes.Buffer
	_, url := startOFREP(t, &logs, nil, nil)
	huge := append([]byte(`{"context":{"targetingKey":"`), bytes.Repeat([]byte("x"), MaxOFREPBody)...)
	huge = append(huge, `"}}`...)
	for _, path := range []string{"/ofrep/v1/evaluate/flags/recommend", "/ofrep/v1/evaluate/flags"} {
		for _, tc := range []struct {
			body    []byte
			status  int
			code    string
			details string
		}{
			{[]byte(`{"context":`), 400, "PARSE_ERROR", "not valid JSON"},
			{[]byte(`{"context":{}} trailing`), 400, "PARSE_ERROR", "not valid JSON"},
			{[]byte(`[]`), 400, "INVALID_CONTEXT", "the body: must be an object, not a JSON array"},
			{[]byte(`{"context":"user-1"}`), 400, "INVALID_CONTEXT", "context: must be an object, not a JSON string"},
			{[]byte(`{"context":{"targetingKey":42}}`), 400, "INVALID_CONTEXT", "context.targetingKey: must be a string, not a JSON number"},
			{huge, 413, "GENERAL", "larger than 1048576 bytes"},
		} {
			resp, ans := post(t, url+path, tc.body)
			if resp.StatusCode != tc.status || ans.ErrorCode != tc.code || !strings.Contains(ans.ErrorDetails, tc.details) {
				t.Errorf("%s %.40s: %d %+v, want %d %s saying %q", path, tc.body, resp.StatusCode, ans, tc.status, tc.code, tc.details)
			}
			if single := !strings.HasSuffix(path, "/flags"); single != (ans.Key == "recommend") {
				t.Errorf("%s %.40s: key %q", path, tc.body, ans.Key)
			}
		}
	}
	if strings.Contains(logs.String(), "level=ERROR") || strings.Contains(logs.String(), "level=WARN") {
		t.Errorf("client mistakes were logged above debug level:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "level=DEBUG msg=\"ofrep request refused\"") {
		t.Errorf("the refusals are not logged at debug level:\n%s", logs.String())
	}
}

// TestOFREPBulk: the bulk answer lists every switch and fallback companion;
// its ETag stays while the answers stay, a matching If-None-Match gets 304,
// and the ETag changes when a switch changes or the context's answers differ.
func TestOFREPBulk(t *testing.T) {
	etcd := etcdtest.Start(t)
	cli := etcd.Client(t)
	sw := wire.Switch{App: app, Name: "recommend", Level: wire.L1, State: wire.StateOff, Rollout: wire.Rollout{Percent: 100},
		Fallback: json.RawMessage(`{"items":[]}`), Version: 1}
	putSwitch(t, cli, sw)
	putSwitch(t, cli, wire.Switch{App: app, Name: "half", Level: wire.L3, State: wire.StateOn,
		Rollout: wire.Rollout{Percent: 50, Stickiness: wire.StickyKey}, Version: 1})
	_, url := startOFREP(t, nil, nil, nil, etcd.Endpoint)
	bulk := url + "/ofrep/v1/evaluate/flags"

	var resp *http.Response
	var ans ofrepAnswer
	servertest.Eventually(t, 10*time.Second, "both switches", func() bool {
		resp, ans = post(t, bulk, keyBody("user-1"))
		return len(ans.Flags) == 3
	})
	got := []string{}
	for _, f := range ans.Flags {
		got = append(got, fmt.Sprintf("%s=%v/%s/%s", f.Key, f.Value, f.Reason, f.Variant))
	}
	half := inRollout("half", "user-1", 50)
	want := []string{fmt.Sprintf("half=%v/SPLIT/%s", half, variant(half)), "recommend=false/DISABLED/off",
		"recommend:fallback=map[items:[]]/STATIC/fallback"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("bulk = %v, want %v", got, want)
	}
	etag := resp.Header.Get("ETag")
	if resp.StatusCode != 200 || !strings.HasPrefix(etag, `"`) {
		t.Fatalf("bulk: %d ETag %q", resp.StatusCode, etag)
	}

	// Same context, same answers: same ETag, and 304 when the client has it.
	if resp, _ := post(t, bulk, keyBody("user-1")); resp.Header.Get("ETag") != etag {
		t.Errorf("ETag changed without a change: %q then %q", etag, resp.Header.Get("ETag"))
	}
	for _, inm := range []string{etag, "W/" + etag, `"other", ` + etag} {
		resp, _ = post(t, bulk, keyBody("user-1"), "If-None-Match", inm)
		if resp.StatusCode != http.StatusNotModified || resp.Header.Get("ETag") != etag {
			t.Errorf("If-None-Match %s: %d ETag %q, want 304", inm, resp.StatusCode, resp.Header.Get("ETag"))
		}
	}

	// A context whose answers differ gets another ETag; one whose answers
	// are the same gets the same.
	other, same := "", ""
	for i := 2; other == "" || same == ""; i++ {
		k := fmt.Sprintf("user-%d", i)
		if inRollout("half", k, 50) != half {
			other = k
		} else {
			same = k
		}
	}
	if resp, _ := post(t, bulk, keyBody(other)); resp.Header.Get("ETag") == etag {
		t.Errorf("context %s answers differently but has the same ETag", other)
	}
	if resp, _ := post(t, bulk, keyBody(same)); resp.Header.Get("ETag") != etag {
		t.Errorf("context %s answers the same but has another ETag", same)
	}

	// A change of a switch changes the ETag; the old one no longer matches.
	sw.State, sw.Version = wire.StateOn, 2
	putSwitch(t, cli, sw)
	servertest.Eventually(t, 10*time.Second, "the flip", func() bool {
		resp, _ = post(t, bulk, keyBody("user-1"), "If-None-Match", etag)
		return resp.StatusCode == 200
	})
	if resp.Header.Get("ETag") == etag {
		t.Error("the ETag did not change with the switch")
	}
}

// TestOFREPRateLimit: past the agent's own limit the OFREP API answers 429
// with Retry-After at once, and admits again once the bucket refilled.
func TestOFREPRateLimit(t *testing.T) {
	clock := limit.NewFakeClock()
	_, url := startOFREP(t, nil, clock, func(c *Config) { c.OFREPRate = 2 })
	flag := url + "/ofrep/v1/evaluate/flags/x"
	for i := range 2 {
		if resp, _ := post(t, flag, nil); resp.StatusCode != 404 {
			t.Fatalf("request %d: %d, want 404 (admitted)", i, resp.StatusCode)
		}
	}
	resp, _ := post(t, url+"/ofrep/v1/evaluate/flags", nil)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("over the limit: %d Retry-After %q, want 429 and 1", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	clock.Advance(time.Second)
	if resp, _ := post(t, flag, nil); resp.StatusCode != 404 {
		t.Errorf("after a second: %d, want admitted", resp.StatusCode)
	}
}

// TestOFREPToken: with a token file, a request without the token gets 401,
// a wrong one 403, the right one its answer.
func TestOFREPToken(t *testing.T) {
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("s3cret-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, url := startOFREP(t, nil, nil, func(c *Config) { c.OFREPTokenFile = file })
	flag := url + "/ofrep/v1/evaluate/flags/x"
	for _, tc := range []struct {
		hdr    []string
		status int
	}{
		{nil, 401},
		{[]string{"Authorization", "Bearer wrong"}, 403},
		{[]string{"Authorization", "Basic czNjcmV0LXRva2Vu"}, 401},
		{[]string{"Authorization", "Bearer s3cret-token"}, 404}, // admitted: the flag does not exist
	} {
		if resp, _ := post(t, flag, nil, tc.hdr...); resp.StatusCode != tc.status {
			t.Errorf("%v: %d, want %d", tc.hdr, resp.StatusCode, tc.status)
		}
	}
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.App, cfg.SnapshotDir, cfg.OFREPTokenFile = app, "", empty
	if _, err := New(context.Background(), cfg, discard); err == nil || !strings.Contains(err.Error(), "--ofrep-token-file") {
		t.Errorf("empty token file: %v", err)
	}
}

// TestOFREPMetrics: evaluations are counted per flag and outcome; a flag
// that is not published counts under an empty flag label.
func TestOFREPMetrics(t *testing.T) {
	etcd := etcdtest.Start(t)
	putSwitch(t, etcd.Client(t), wire.Switch{App: app, Name: "everyone", Level: wire.L1, State: wire.StateOn,
		Rollout: wire.Rollout{Percent: 100}, Fallback: json.RawMessage(`[]`), Version: 1})
	a, url := startOFREP(t, nil, nil, nil, etcd.Endpoint)
	servertest.Eventually(t, 10*time.Second, "live data", func() bool {
		resp, _ := post(t, url+"/ofrep/v1/evaluate/flags/everyone", nil)
		return resp.StatusCode == 200
	})
	post(t, url+"/ofrep/v1/evaluate/flags/everyone:fallback", nil)
	post(t, url+"/ofrep/v1/evaluate/flags/nothing-here", nil)
	post(t, url+"/ofrep/v1/evaluate/flags/everyone", []byte("{"))
	srv := httptest.NewServer(a.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`switchyard_agent_ofrep_evaluations_total{flag="everyone",outcome="true"} 1`,
		`switchyard_agent_ofrep_evaluations_total{flag="everyone",outcome="fallback"} 1`,
		`switchyard_agent_ofrep_evaluations_total{flag="everyone",outcome="parse_error"} 1`,
		`switchyard_agent_ofrep_evaluations_total{flag="",outcome="flag_not_found"} `, // also while waiting for live data
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// TestOFREPStale: while etcd is down the OFREP answers stay and their
// metadata says stale; the bulk ETag changes with it and back.
func TestOFREPStale(t *testing.T) {
	etcd := etcdtest.Start(t)
	putSwitch(t, etcd.Client(t), wire.Switch{App: app, Name: "recommend", Level: wire.L3, State: wire.StateOn,
		Rollout: wire.Rollout{Percent: 100}, Version: 1})
	_, url := startOFREP(t, nil, nil, nil, etcd.Endpoint)
	flag := url + "/ofrep/v1/evaluate/flags/recommend"
	var ans ofrepAnswer
	servertest.Eventually(t, 10*time.Second, "live", func() bool {
		_, ans = post(t, flag, nil)
		return ans.Metadata["source"] == "live"
	})
	live, _ := post(t, url+"/ofrep/v1/evaluate/flags", nil)

	etcd.Stop()
	servertest.Eventually(t, 10*time.Second, "stale", func() bool {
		_, ans = post(t, flag, nil)
		return ans.Metadata["source"] == "stale"
	})
	if ans.Value != true || ans.Reason != "STATIC" || ans.ErrorCode != "" {
		t.Errorf("answer while etcd is down: %+v", ans)
	}
	if resp, _ := post(t, url+"/ofrep/v1/evaluate/flags", nil, "If-None-Match", live.Header.Get("ETag")); resp.StatusCode != 200 {
		t.Errorf("bulk while stale: %d, want 200 with a new ETag (the metadata changed)", resp.StatusCode)
	}

	etcd.Restart()
	servertest.Eventually(t, 10*time.Second, "live again", func() bool {
		_, ans = post(t, flag, nil)
		return ans.Metadata["source"] == "live"
	})
	if resp, _ := post(t, url+"/ofrep/v1/evaluate/flags", nil, "If-None-Match", live.Header.Get("ETag")); resp.StatusCode != http.StatusNotModified {
		t.Errorf("bulk live again: %d, want 304 (the same answers as before)", resp.StatusCode)
	}
}
