package webui_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/internal/etcdtest"
	"github.com/switchyard-io/switchyard/internal/pgtest"
	"github.com/switchyard-io/switchyard/sdk/limit"
	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/console"
	"github.com/switchyard-io/switchyard/server/webui"
)

const bootstrapToken = "bootstrap-token-for-webui-tests"

// admin is the actor tests use to seed data through the service.
var admin = server.Actor{Name: "seed", Kind: audit.ActorUser, Role: server.RoleAdmin}

// startConsole runs a full console (real Postgres, real etcd) with the web UI.
func startConsole(t testing.TB) *console.Console {
	t.Helper()
	return startConsoleWith(t, webui.Options{Clock: fastClock{}})
}

// fastClock runs a thousand times faster than real time, so the sign-in
// throttle refills between the many sign-ins of a test; the throttle's own
// test uses a fake clock instead.
type fastClock struct{}

func (fastClock) Nanotime() int64 { return limit.SystemClock.Nanotime() * 1000 }

// startConsoleWith is startConsole with web UI options and changes to the
// console's configuration.
func startConsoleWith(t testing.TB, o webui.Options, mod ...func(*console.Config)) *console.Console {
	t.Helper()
	pg := pgtest.NewDatabase(t)
	etcd := etcdtest.Start(t)
	cfg := console.DefaultConfig()
	cfg.Listen, cfg.DataDir, cfg.DatabaseURL = "127.0.0.1:0", t.TempDir(), pg
	cfg.EtcdEndpoints, cfg.BootstrapToken = []string{etcd.Endpoint}, bootstrapToken
	cfg.ReconcileInterval = time.Second
	for _, m := range mod {
		m(&cfg)
	}
	c, err := console.Start(context.Background(), cfg, nil, console.WithWebUI(o))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return c
}

// mustCreateUser adds a user through the service.
func mustCreateUser(t testing.TB, c *console.Console, name string, role server.Role, apps ...string) string {
	t.Helper()
	pw := name + "-password-123"
	if _, err := c.Service.CreateUser(context.Background(), admin, server.UserInput{Username: name, Password: pw, Role: role, Apps: apps, Reason: "test user"}); err != nil {
		t.Fatal(err)
	}
	return pw
}

// client is a browser without JavaScript: cookies, no redirects followed,
// and it asks for pages (Accept: text/html).
type client struct {
	t    testing.TB
	base string
	http *http.Client
}

// browserAccept is the Accept header of a browser's navigation.
const browserAccept = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"

func newClient(t testing.TB, c *console.Console) *client {
	jar, _ := cookiejar.New(nil)
	return &client{t: t, base: c.URL(), http: &http.Client{
		Jar: jar, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

var csrfRe = regexp.MustCompile(`name="_csrf" value="([^"]+)"`)

// get returns status and body.
func (cl *client) get(path string) (int, string) {
	cl.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, cl.base+path, nil)
	req.Header.Set("Accept", browserAccept)
	res, err := cl.http.Do(req)
	if err != nil {
		cl.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// csrf reads the CSRF token from a page.
func (cl *client) csrf(path string) string {
	cl.t.Helper()
	_, body := cl.get(path)
	m := csrfRe.FindStringSubmatch(body)
	if m == nil {
		cl.t.Fatalf("no CSRF token on %s", path)
	}
	return m[1]
}

// post submits a form and returns status, Location and body.
func (cl *client) post(path string, form url.Values) (int, string, string) {
	cl.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, cl.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", browserAccept)
	res, err := cl.http.Do(req)
	if err != nil {
		cl.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header.Get("Location"), string(b)
}

// signIn signs in and fails the test unless it worked.
func (cl *client) signIn(user, pw string) {
	cl.t.Helper()
	tok := cl.csrf("/ui/login")
	status, loc, body := cl.post("/ui/login", url.Values{"_csrf": {tok}, "username": {user}, "password": {pw}, "next": {"/ui/"}})
	if status != http.StatusSeeOther || loc != "/ui/" {
		cl.t.Fatalf("sign in as %s: %d %s\n%s", user, status, loc, body)
	}
}
