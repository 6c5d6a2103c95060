package ofreptest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/agent"
	"github.com/switchyard-io/switchyard/internal/etcdtest"
	"github.com/switchyard-io/switchyard/internal/pgtest"
	"github.com/switchyard-io/switchyard/internal/servertest"
	"github.com/switchyard-io/switchyard/sdk"
	"github.com/switchyard-io/switchyard/server/console"
)

const token = "sy_ofreptest-admin-token"

// requireNode returns once node and this directory's node_modules are
// there: it runs `npm ci` when node_modules is missing. Without node or
// npm the test skips, except under CI=true where it fails.
func requireNode(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is not installed; .ci/run installs Debian's nodejs and npm", tool)
			}
			t.Skipf("%s is not installed (under CI=true this fails)", tool)
		}
	}
	if _, err := os.Stat("node_modules/@openfeature/ofrep-provider"); err == nil {
		return
	}
	cmd := exec.Command("npm", "ci", "--prefer-offline", "--no-audit", "--no-fund")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci: %v\n%s", err, out)
	}
}

// detail is one evaluation's details as the OpenFeature client returns them.
type detail struct {
	Value        any            `json:"value"`
	Reason       string         `json:"reason"`
	Variant      string         `json:"variant"`
	ErrorCode    string         `json:"errorCode"`
	ErrorMessage string         `json:"errorMessage"`
	Metadata     map[string]any `json:"metadata"`
}

// nodeClient is driver.mjs: OpenFeature's server SDK with its OFREP provider.
type nodeClient struct {
	t     *testing.T
	in    io.Writer
	lines *bufio.Scanner
}

func startNode(t *testing.T, ofrepURL string) *nodeClient {
	t.Helper()
	cmd := exec.Command("node", "driver.mjs")
	cmd.Env = append(os.Environ(), "OFREP_URL="+ofrepURL)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		in.Close() // the driver ends at the end of its input
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	n := &nodeClient{t: t, in: in, lines: bufio.NewScanner(out)}
	n.lines.Buffer(nil, 1<<24)
	if !n.lines.Scan() || !strings.Contains(n.lines.Text(), `"ready":true`) {
		t.Fatalf("the node driver did not start: %q %v", n.lines.Text(), n.lines.Err())
	}
	return n
}

// eval evaluates flag once per key (once without a key when keys is nil).
func (n *nodeClient) eval(typ, flag string, def any, keys ...string) []detail {
	n.t.Helper()
	cmd := map[string]any{"type": typ, "flag": flag, "default": def}
	if keys != nil {
		cmd["keys"] = keys
	}
	b, _ := json.Marshal(cmd)
	if _, err := n.in.Write(append(b, '\n')); err != nil {
		n.t.Fatal(err)
	}
	if !n.lines.Scan() {
		n.t.Fatalf("the node driver stopped: %v", n.lines.Err())
	}
	var out []detail
	if err := json.Unmarshal(n.lines.Bytes(), &out); err != nil {
		n.t.Fatalf("%v in %s", err, n.lines.Text())
	}
	return out
}

func (n *nodeClient) boolean(flag string) detail { return n.eval("boolean", flag, false)[0] }

// api calls the console's JSON API and fails the test unless it answers want.
func api(t *testing.T, c *console.Console, method, path, body string, want int) {
	t.Helper()
	req, _ := http.NewRequest(method, c.URL()+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %d %s, want %d", method, path, resp.StatusCode, raw, want)
	}
}

// TestNodeOpenFeatureClient evaluates a switch through a running agent
// with @openfeature/server-sdk and @openfeature/ofrep-provider while the
// console changes it, then with etcd stopped.
func TestNodeOpenFeatureClient(t *testing.T) {
	requireNode(t)
	etcd := etcdtest.Start(t)
	log := slog.New(slog.DiscardHandler)

	cfg := console.DefaultConfig()
	cfg.Listen, cfg.DataDir, cfg.DatabaseURL = "127.0.0.1:0", t.TempDir(), pgtest.NewDatabase(t)
	cfg.EtcdEndpoints, cfg.BootstrapToken = []string{etcd.Endpoint}, token
	c, err := console.Start(context.Background(), cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Shutdown(ctx)
	})
	servertest.Eventually(t, 15*time.Second, "the console leads", c.Scheduler.Leading)
	base := "/api/v1/apps/checkout/switches"
	api(t, c, "POST", base, `{"name":"recommend","level":"L1","fallback":{"items":[]},"reason":"ofrep test"}`, 201)

	acfg := agent.DefaultConfig()
	acfg.App, acfg.EtcdEndpoints, acfg.SnapshotDir, acfg.InstanceID = "checkout", []string{etcd.Endpoint}, t.TempDir(), "agent-1"
	a, err := agent.New(context.Background(), acfg, log)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.OFREPHandler())
	t.Cleanup(func() { srv.Close(); a.Close() })

	// The Go SDK, for the same keys.
	gosdk, err := sdk.New(context.Background(), sdk.Config{Endpoints: []string{etcd.Endpoint}, App: "checkout",
		InstanceID: "go-1", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gosdk.Close() })
	h := gosdk.Switch("recommend")

	node := startNode(t, srv.URL)
	var d detail
	servertest.Eventually(t, 10*time.Second, "the published switch", func() bool {
		d = node.boolean("recommend")
		return d.Metadata["source"] == "live"
	})
	if d.Value != false || d.Reason != "DISABLED" || d.Variant != "off" || d.ErrorCode != "" ||
		d.Metadata["level"] != "L1" || d.Metadata["state"] != "off" || d.Metadata["version"] != 1.0 {
		t.Fatalf("off switch: %+v", d)
	}

	// On at 100 %: true within a second of the console's answer.
	api(t, c, "POST", base+"/recommend/on", `{"reason":"recs timing out","version":1,"rollout":{"percent":100}}`, 200)
	changed := time.Now()
	for d = node.boolean("recommend"); d.Value != true; d = node.boolean("recommend") {
		if time.Since(changed) > time.Second {
			t.Fatalf("still %+v a second after the console turned the switch on", d)
		}
	}
	t.Logf("true %v after the console's answer", time.Since(changed).Round(time.Millisecond))
	if d.Reason != "STATIC" || d.Variant != "on" {
		t.Errorf("on at 100 %%: %+v", d)
	}
	fb := node.eval("object", "recommend:fallback", map[string]any{"default": true})[0]
	if !reflect.DeepEqual(fb.Value, map[string]any{"items": []any{}}) || fb.Reason != "STATIC" || fb.Variant != "fallback" {
		t.Errorf("fallback companion: %+v", fb)
	}

	// 50 % with key stickiness: the same answers as the Go SDK for 1,000 keys.
	api(t, c, "POST", base+"/recommend/on", `{"reason":"half","version":2,"rollout":{"percent":50,"stickiness":"key"}}`, 200)
	servertest.Eventually(t, 10*time.Second, "version 3 in the agent and the Go SDK", func() bool {
		d = node.boolean("recommend")
		return d.Metadata["version"] == 3.0 && h.Value() != nil && h.Value().Version == 3
	})
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = fmt.Sprintf("tenant-%d", i)
	}
	answers := node.eval("boolean", "recommend", false, keys...)
	on, differ := 0, 0
	for i, k := range keys {
		want := h.On(sdk.WithKey(context.Background(), k))
		if answers[i].Value != want || answers[i].Reason != "SPLIT" {
			differ++
			if differ <= 5 {
				t.Errorf("key %s: OFREP %+v, Go SDK %v", k, answers[i], want)
			}
		}
		if want {
			on++
		}
	}
	t.Logf("50 %%: %d of 1000 keys on; %d answers differ from the Go SDK's", on, differ)
	if on < 400 || on > 600 {
		t.Errorf("%d of 1000 keys on at 50 %%", on)
	}

	// Unknown flag: the provider's FLAG_NOT_FOUND, the default returned.
	for _, def := range []bool{true, false} {
		if d := node.eval("boolean", "no-such-switch", def)[0]; d.Value != def || d.ErrorCode != "FLAG_NOT_FOUND" || d.Reason != "ERROR" ||
			!strings.Contains(d.ErrorMessage, `no switch "no-such-switch"`) {
			t.Errorf("unknown flag, default %v: %+v", def, d)
		}
	}

	// etcd stopped: the same answers, marked stale.
	etcd.Stop()
	servertest.Eventually(t, 15*time.Second, "stale answers", func() bool {
		return node.boolean("recommend").Metadata["source"] == "stale"
	})
	stale := node.eval("boolean", "recommend", false, keys...)
	for i := range keys {
		if stale[i].Value != answers[i].Value || stale[i].Metadata["source"] != "stale" || stale[i].ErrorCode != "" {
			t.Fatalf("key %s with etcd stopped: %+v, before %+v", keys[i], stale[i], answers[i])
		}
	}
	etcd.Restart() // lets the console and the clients shut down at once
}
