package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"gorm.io/gorm"

	"github.com/switchyard-io/switchyard/internal/etcdtest"
	"github.com/switchyard-io/switchyard/internal/pgtest"
	"github.com/switchyard-io/switchyard/internal/servertest"
	"github.com/switchyard-io/switchyard/server/console"
)

const adminToken = "sy_test-bootstrap-admin-token"

// env is one Postgres database and one embedded etcd shared by the
// consoles of a test.
type env struct {
	t     testing.TB
	etcd  *etcdtest.Server
	cli   *clientv3.Client
	pgURL string
	log   *slog.Logger // for the consoles; nil discards
	gdb   *gorm.DB     // see db (drill_test.go)
	// egressAllow are the receivers and probe targets the test started:
	// the consoles' egress allowlist names them, and nothing more.
	egressAllow []string
	consoles    []*console.Console
	// endpoints, when set, are the etcd endpoints of child consoles
	// instead of etcd's (the soak test's three-member cluster).
	endpoints string
}

// allowEgress adds host:port (a receiver or probe target the test started)
// to the egress allowlist of the env's consoles, running and future.
func (e *env) allowEgress(hostPort string) {
	e.t.Helper()
	e.egressAllow = append(e.egressAllow, hostPort)
	for _, c := range e.consoles {
		if err := c.Egress.Allow(hostPort); err != nil {
			e.t.Fatal(err)
		}
	}
}

func newEnv(t testing.TB) *env {
	e := &env{t: t, etcd: etcdtest.Start(t), pgURL: pgtest.NewDatabase(t)}
	e.cli = e.etcd.Client(t)
	return e
}

// start runs a console against the env; it shuts down when the test ends.
func (e *env) start(mod ...func(*console.Config)) *console.Console {
	e.t.Helper()
	return e.startWith(nil, mod...)
}

// startWith is start with console options.
func (e *env) startWith(opts []console.Option, mod ...func(*console.Config)) *console.Console {
	e.t.Helper()
	cfg := console.DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.DataDir = e.t.TempDir()
	cfg.DatabaseURL = e.pgURL
	cfg.EtcdEndpoints = []string{e.etcd.Endpoint}
	cfg.BootstrapToken = adminToken
	cfg.ReconcileInterval = 500 * time.Millisecond
	cfg.EgressAllow = append([]string(nil), e.egressAllow...)
	for _, m := range mod {
		m(&cfg)
	}
	c, err := console.Start(context.Background(), cfg, e.log, opts...)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { stop(c) })
	e.consoles = append(e.consoles, c)
	return c
}

func stop(c *console.Console) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = c.Shutdown(ctx)
}

// waitLeader waits until c leads the scheduler.
func waitLeader(t testing.TB, c *console.Console) {
	t.Helper()
	servertest.Eventually(t, 15*time.Second, "console leads", c.Scheduler.Leading)
}

// response is a decoded API answer.
type response struct {
	Status int
	Header http.Header
	Body   map[string]any
	Raw    string
}

func (r response) str(path ...string) string {
	var v any = r.Body
	for _, p := range path {
		m, _ := v.(map[string]any)
		v = m[p]
	}
	switch x := v.(type) {
	case string:
		return x
	case nil:
		return ""
	default:
		b, _ := json.Marshal(x)
		return string(b)
	}
}

func (r response) num(path ...string) float64 {
	var v any = r.Body
	for _, p := range path {
		m, _ := v.(map[string]any)
		v = m[p]
	}
	f, _ := v.(float64)
	return f
}

// apiClient sends the tests' API calls on a new connection each. The
// tests stop and start many consoles; a non-idempotent request (POST,
// PATCH) that net/http sends on a pooled connection the server side has
// just closed is not retried and fails with EOF — seen once in CI on a
// PATCH — which would be the harness's fault, not the console's.
var apiClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// call sends a request with a JSON body (unless body is "") and the token.
func call(t testing.TB, c *console.Console, method, path, token, body string, hdr ...string) response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, c.URL()+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := apiClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := response{Status: resp.StatusCode, Header: resp.Header, Raw: string(raw)}
	_ = json.Unmarshal(raw, &r.Body)
	return r
}

func mustStatus(t testing.TB, r response, want int) response {
	t.Helper()
	if r.Status != want {
		t.Fatalf("status %d, want %d: %s", r.Status, want, r.Raw)
	}
	return r
}

// mustProblem checks that r is an RFC 9457 problem of status want and, when
// field is not empty, that it names field.
func mustProblem(t testing.TB, r response, want int, field string) response {
	t.Helper()
	mustStatus(t, r, want)
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/problem+json") {
		t.Fatalf("content type %q: %s", ct, r.Raw)
	}
	if r.num("status") != float64(want) || r.str("title") == "" {
		t.Fatalf("not a problem document: %s", r.Raw)
	}
	if field != "" && r.str("field") != field {
		t.Fatalf("field %q, want %q: %s", r.str("field"), field, r.Raw)
	}
	return r
}

// etcdValue reads a key; "" when absent.
func (e *env) etcdValue(key string) string {
	e.t.Helper()
	v, _ := e.etcd.Get(e.t, e.cli, key)
	return v
}

// jsonEq compares two JSON documents semantically.
func jsonEq(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	bx, _ := json.Marshal(x)
	by, _ := json.Marshal(y)
	return bytes.Equal(bx, by)
}
