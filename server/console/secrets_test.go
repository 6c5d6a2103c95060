package console_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/server/console"
	"github.com/switchyard-io/switchyard/server/seal"
)

// lockedBuffer collects the consoles' logs.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestSecretsSealed: a channel secret and a probe header value are sealed
// in the rows that hold them (channel, drill; runs hold no header value),
// are never in an API
// answer, an audit event or a log line, and still work (the receiver
// verifies the signature; the probe sends the header). A second key put
// first still opens what the first sealed; `console secrets rotate` seals
// everything under it, after which the first key can go.
func TestSecretsSealed(t *testing.T) {
	const headerSecret = "probe-header-secret-4711"
	e := newEnv(t)
	var logs lockedBuffer
	e.log = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	keyA, keyB := seal.NewKeyLine(), seal.NewKeyLine()
	idA, _, _ := strings.Cut(keyA, ":")
	idB, _, _ := strings.Cut(keyB, ":")
	keyFile := filepath.Join(t.TempDir(), "keys")
	writeKeys := func(lines ...string) {
		t.Helper()
		if err := os.WriteFile(keyFile, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeKeys(keyA)
	// The test database trusts every local connection, so a password in
	// its URL is ignored by Postgres but must not be shown by the console.
	const dbPassword = "db-password-8152"
	dbURL := strings.Replace(e.pgURL, "postgres@", "postgres:"+dbPassword+"@", 1)
	if dbURL == e.pgURL {
		t.Fatalf("cannot put a password in %s", e.pgURL)
	}
	withKeys := func(c *console.Config) {
		c.SecretKeyFile, c.DatabaseURL, c.ElectionTTL = keyFile, dbURL, 5*time.Second
	}

	var sentHeader atomic.Value
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sentHeader.Store(r.Header.Get("X-Token"))
		fmt.Fprint(w, `{"items":[]}`)
	}))
	t.Cleanup(target.Close)
	e.allowEgress(target.Listener.Addr().String())
	hook := newHook(t, e, time.Now, 0)
	const app = "shop-secrets"
	startDrillTarget(t, e, app, svcCorrect, 1)

	c := e.start(withKeys)
	waitLeader(t, c)
	waitInstances(t, c, app, 1)
	mustStatus(t, call(t, c, "POST", "/api/v1/apps/"+app+"/switches", adminToken, `{"name":"recommend","level":"L1","fallback":{"items":[]},"reason":"seed"}`), 201)
	addChannel(t, c, "ops", hook.srv.URL, "channel.test")
	mustStatus(t, call(t, c, "POST", "/api/v1/apps/"+app+"/drills", adminToken, fmt.Sprintf(
		`{"name":"reco","switch":"recommend","target":{"percent":100},"duration":"1m","probes":[{"url":%q,"headers":{"X-Token":%q},"requests":1}],"reason":"r"}`,
		target.URL+"/x", headerSecret)), 201)

	run := 0
	works := func(c *console.Console) {
		t.Helper()
		d := mustStatus(t, call(t, c, "POST", "/api/v1/channels/ops/test", adminToken, `{"reason":"check"}`), 200)
		if d.str("delivery", "status") != "delivered" {
			t.Fatalf("the receiver did not accept the signed delivery: %s", d.Raw)
		}
		sentHeader.Store("")
		run++
		mustStatus(t, call(t, c, "POST", "/api/v1/apps/"+app+"/drills/reco/runs", adminToken, `{"reason":"check","dry_run":true}`), 202)
		waitRunOf(t, c, app, "reco", run, 20*time.Second)
		if v, _ := sentHeader.Load().(string); v != headerSecret {
			t.Fatalf("the probe sent X-Token %q", v)
		}
	}
	sealedUnder := func(id string) {
		t.Helper()
		db := e.db(t)
		var secrets, specs, runSpecs []string
		db.Raw("SELECT secret FROM channels").Scan(&secrets)
		db.Raw("SELECT spec FROM drills").Scan(&specs)
		db.Raw("SELECT spec FROM drill_runs").Scan(&runSpecs)
		for _, s := range secrets {
			if !strings.HasPrefix(s, seal.Prefix+id+":") {
				t.Fatalf("channel secret not sealed under %s: %.40s…", id, s)
			}
		}
		for _, s := range specs {
			if !strings.Contains(s, seal.Prefix+id+":") || strings.Contains(s, headerSecret) {
				t.Fatalf("drill spec not sealed under %s: %s", id, s)
			}
		}
		for _, s := range runSpecs {
			if strings.Contains(s, headerSecret) || strings.Contains(s, seal.Prefix) {
				t.Fatalf("a run row holds the header value: %s", s)
			}
		}
	}
	works(c)
	sealedUnder(idA)

	// A new first key: the old ciphertexts still open.
	stop(c)
	writeKeys(keyB, keyA)
	c = e.start(withKeys)
	waitLeader(t, c)
	works(c)
	// Rotation seals everything under the new key; the old one can go.
	var out strings.Builder
	cfg := console.DefaultConfig()
	cfg.DatabaseURL, cfg.SecretKeyFile = e.pgURL, keyFile
	if err := console.SecretsCommand(context.Background(), cfg, []string{"rotate"}, &out); err != nil {
		t.Fatal(err)
	}
	t.Logf("rotate: %s", strings.TrimSpace(out.String()))
	sealedUnder(idB)
	stop(c)
	writeKeys(keyB)
	c = e.start(withKeys)
	waitLeader(t, c)
	works(c)

	// No secret in any answer, audit event or log line.
	secrets := []string{hookSecret, headerSecret, adminToken, dbPassword}
	var described strings.Builder
	c.Describe(&described)
	logs.Write([]byte(described.String()))
	for _, p := range []string{"/api/v1/channels", "/api/v1/channels/ops", "/api/v1/deliveries", "/api/v1/audit?limit=1000",
		"/api/v1/apps/" + app + "/drills", "/api/v1/apps/" + app + "/drills/reco/runs",
		"/api/v1/apps/" + app + "/drills/reco/runs/1/report.md", "/api/v1/apps/" + app + "/drills/reco/runs/1/report.json"} {
		r := mustStatus(t, call(t, c, "GET", p, adminToken, ""), 200)
		for _, s := range secrets {
			if strings.Contains(r.Raw, s) {
				t.Fatalf("%s shows a secret", p)
			}
		}
	}
	var audit []string
	e.db(t).Raw("SELECT CONCAT(before, ' ', after, ' ', reason) FROM audit_events").Scan(&audit)
	if len(audit) == 0 {
		t.Fatal("no audit events read")
	}
	for _, row := range audit {
		for _, s := range secrets {
			if strings.Contains(row, s) {
				t.Fatalf("an audit event holds a secret: %s", row)
			}
		}
	}
	if logs.String() == "" {
		t.Fatal("no log lines captured")
	}
	for _, s := range secrets {
		if strings.Contains(logs.String(), s) {
			t.Fatal("a log line holds a secret")
		}
	}
	// A PATCH that sends the placeholder back keeps the secret.
	mustStatus(t, call(t, c, "PATCH", "/api/v1/channels/ops", adminToken, `{"secret":"(hidden)","reason":"edit form sent it back"}`), 200)
	works(c)
}
