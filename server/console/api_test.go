package console_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/servertest"
)

// TestAuditBeforeAfterAreObjects: the API's audit events carry before and
// after as JSON documents, not as strings holding JSON.
func TestAuditBeforeAfterAreObjects(t *testing.T) {
	e := newEnv(t)
	c := e.start()
	mustStatus(t, call(t, c, "POST", "/api/v1/apps/checkout/switches", adminToken, `{"name":"reco","level":"L3","reason":"seed"}`), 201)
	mustStatus(t, call(t, c, "POST", "/api/v1/apps/checkout/switches/reco/on", adminToken, `{"reason":"incident"}`), 200)
	r := mustStatus(t, call(t, c, "GET", "/api/v1/audit?target=switch/checkout/reco", adminToken, ""), 200)
	var body struct {
		Events []struct {
			Action string          `json:"action"`
			Before json.RawMessage `json:"before"`
			After  json.RawMessage `json:"after"`
		} `json:"events"`
	}
	if err := json.Unmarshal([]byte(r.Raw), &body); err != nil || len(body.Events) != 2 {
		t.Fatalf("audit: %v %s", err, r.Raw)
	}
	on := body.Events[0]
	var before, after struct{ State string }
	if on.Action != "switch.on" || json.Unmarshal(on.Before, &before) != nil || json.Unmarshal(on.After, &after) != nil {
		t.Fatalf("before/after are not objects: %s / %s", on.Before, on.After)
	}
	if before.State != "off" || after.State != "on" {
		t.Fatalf("before %+v after %+v", before, after)
	}
	if create := body.Events[1]; create.Before != nil {
		t.Fatalf("a create has no before, got %s", create.Before)
	}
}

// TestUsersAPI: accounts can be managed by automation with the same rules
// as the web UI: create, read, disable (which ends sign-in), all audited
// with the token that did it.
func TestUsersAPI(t *testing.T) {
	e := newEnv(t)
	c := e.start()
	r := mustStatus(t, call(t, c, "POST", "/api/v1/users", adminToken, `{"username":"olga","password":"olga-password-1","role":"operator","apps":["checkout"],"reason":"new on-call"}`), 201)
	if r.str("user", "username") != "olga" || r.str("user", "apps") != `["checkout"]` || strings.Contains(r.Raw, "password_hash") || strings.Contains(r.Raw, "$2a$") {
		t.Fatalf("create: %s", r.Raw)
	}
	if r := mustStatus(t, call(t, c, "GET", "/api/v1/users", adminToken, ""), 200); !strings.Contains(r.Raw, `"username":"olga"`) {
		t.Fatalf("list: %s", r.Raw)
	}
	mustStatus(t, call(t, c, "PATCH", "/api/v1/users/olga", adminToken, `{"disabled":true,"reason":"left the team"}`), 200)
	if r := mustStatus(t, call(t, c, "GET", "/api/v1/users/olga", adminToken, ""), 200); r.str("user", "disabled_at") == "" {
		t.Fatalf("not disabled: %s", r.Raw)
	}
	if _, err := c.Service.SignIn(context.Background(), "olga", "olga-password-1"); err == nil {
		t.Fatal("a disabled user signs in")
	}
	r = mustStatus(t, call(t, c, "GET", "/api/v1/audit?target=user/olga", adminToken, ""), 200)
	if n := strings.Count(r.Raw, `"actor":"token:bootstrap#1"`); n != 2 {
		t.Fatalf("want 2 events by the bootstrap token, got %d: %s", n, r.Raw)
	}
}

// TestClientGoneIsNotAFailure: a client that disconnects while its request
// waits for the database is answered 499 (in the metrics) and is not
// logged as a server failure.
func TestClientGoneIsNotAFailure(t *testing.T) {
	e := newEnv(t)
	var logs syncBuffer
	e.log = slog.New(slog.NewTextHandler(&logs, nil))
	c := e.start()
	locker, err := sql.Open("pgx", e.pgURL)
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close()
	tx, err := locker.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := tx.Exec("LOCK TABLE switches IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", c.URL()+"/api/v1/apps/checkout/switches", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	done := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	servertest.Eventually(t, 10*time.Second, "the request waits on the lock", func() bool {
		var n int
		_ = locker.QueryRow("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'").Scan(&n)
		return n > 0
	})
	cancel()
	<-done
	metric := `switchyard_http_requests_total{method="GET",route="/api/v1/apps/:app/switches",status="499"} 1`
	servertest.Eventually(t, 10*time.Second, "the request is counted as 499", func() bool {
		resp, err := http.Get(c.URL() + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return strings.Contains(string(b), metric)
	})
	if out := logs.String(); strings.Contains(out, "request failed") {
		t.Fatalf("a client that went away was logged as a failure:\n%s", out)
	}
}

// TestAnswersEndWithNewline: every JSON answer and problem document ends
// with a newline, so documents printed one after another (a shell loop of
// curl calls) stay one per line; event streams and pages are not JSON.
func TestAnswersEndWithNewline(t *testing.T) {
	e := newEnv(t)
	c := e.start()
	cases := []struct {
		name, method, path, token, body string
		status                          int
	}{
		{"create", "POST", "/api/v1/apps/checkout/switches", adminToken, `{"name":"reco","level":"L3","reason":"seed"}`, 201},
		{"get", "GET", "/api/v1/apps/checkout/switches/reco", adminToken, "", 200},
		{"list", "GET", "/api/v1/apps/checkout/switches", adminToken, "", 200},
		{"health", "GET", "/healthz", "", "", 200},
		{"validation problem", "POST", "/api/v1/apps/checkout/switches", adminToken, `{"name":"x","level":"L9","reason":"r"}`, 400},
		{"unauthorized problem", "GET", "/api/v1/switches", "", "", 401},
		{"no route problem", "GET", "/api/v1/nowhere", adminToken, "", 404},
	}
	for _, tc := range cases {
		r := mustStatus(t, call(t, c, tc.method, tc.path, tc.token, tc.body), tc.status)
		if !strings.HasSuffix(r.Raw, "}\n") || strings.HasSuffix(r.Raw, "\n\n") {
			t.Errorf("%s: answer does not end with exactly one newline: %q", tc.name, r.Raw)
		}
	}
}
