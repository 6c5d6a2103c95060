package notify

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestSignVector pins the signature: HMAC-SHA256 over "<ts>.<body>",
// hex, prefixed "sha256=" (computed independently with
// `printf '1733050000.{"a":1}' | openssl dgst -sha256 -hmac secret-of-16-chars`).
func TestSignVector(t *testing.T) {
	got := Sign("secret-of-16-chars", 1733050000, []byte(`{"a":1}`))
	const want = "sha256=87d3085d09baecca0a66cd69aeac97f017e0eff494c61cca5ec9d4d18d8ef455"
	if got != want {
		t.Fatalf("signature %q, want %q", got, want)
	}
}

// TestVerify: a receiver accepts the signed request, refuses a changed
// body, a changed timestamp and a replay outside the tolerance.
func TestVerify(t *testing.T) {
	now := time.Unix(1733050000, 0)
	body := []byte(`{"idempotency_key":"k"}`)
	h := http.Header{}
	h.Set(HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
	h.Set(HeaderSignature, Sign("s3cret-s3cret-s3cret", now.Unix(), body))
	if err := Verify("s3cret-s3cret-s3cret", h, body, now.Add(time.Minute), DefaultTolerance); err != nil {
		t.Fatalf("a good request: %v", err)
	}
	if err := Verify("s3cret-s3cret-s3cret", h, []byte(`{"idempotency_key":"x"}`), now, DefaultTolerance); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("changed body: %v", err)
	}
	if err := Verify("another-secret-entirely", h, body, now, DefaultTolerance); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("wrong secret: %v", err)
	}
	moved := h.Clone()
	moved.Set(HeaderTimestamp, strconv.FormatInt(now.Unix()+600, 10))
	if err := Verify("s3cret-s3cret-s3cret", moved, body, now.Add(10*time.Minute), DefaultTolerance); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("a fresh timestamp on an old signature: %v", err)
	}
	if err := Verify("s3cret-s3cret-s3cret", h, body, now.Add(6*time.Minute), DefaultTolerance); !errors.Is(err, ErrReplay) {
		t.Fatalf("a replay after 6 minutes: %v", err)
	}
}

// TestBackoff: the wait doubles per attempt from Min up to Max, half of it
// fixed and half random; Retry-After lengthens it up to Max; a delivery is
// given up once its next attempt would start past For.
func TestBackoff(t *testing.T) {
	p := retryPolicy{Min: 5 * time.Second, Max: time.Minute, For: 10 * time.Minute}
	low := func(int64) int64 { return 0 }
	high := func(n int64) int64 { return n - 1 }
	for _, tc := range []struct {
		n         int
		lo, hi    time.Duration
		retryWait time.Duration
	}{
		{1, 2500 * time.Millisecond, 5 * time.Second, 0},
		{2, 5 * time.Second, 10 * time.Second, 0},
		{3, 10 * time.Second, 20 * time.Second, 0},
		{4, 20 * time.Second, 40 * time.Second, 0},
		{5, 30 * time.Second, time.Minute, 0},
		{9, 30 * time.Second, time.Minute, 0},
	} {
		if got := p.backoff(tc.n, low); got != tc.lo {
			t.Errorf("attempt %d, least jitter: %v, want %v", tc.n, got, tc.lo)
		}
		if got := p.backoff(tc.n, high); got != tc.hi {
			t.Errorf("attempt %d, most jitter: %v, want %v", tc.n, got, tc.hi)
		}
	}
	created := time.Unix(0, 0)
	if at, ok := p.next(created, created, 1, 45*time.Second, low); !ok || at.Sub(created) != 45*time.Second {
		t.Errorf("Retry-After 45s: %v %v", at, ok)
	}
	if at, ok := p.next(created, created, 1, time.Hour, low); !ok || at.Sub(created) != time.Minute {
		t.Errorf("Retry-After 1h is capped at Max: %v %v", at, ok)
	}
	if _, ok := p.next(created, created.Add(9*time.Minute+40*time.Second), 6, 0, high); ok {
		t.Error("retried past For")
	}
	if _, ok := (retryPolicy{}).next(created, created, 1, 0, low); ok {
		t.Error("a policy without For retried")
	}
}

// TestWants: a channel gets the kinds it names (or every kind for "*"),
// for the apps it names (or every app); events about no app reach every
// channel of their kind.
func TestWants(t *testing.T) {
	ch := Channel{Events: "expiry.reminder,finding.opened", Apps: "checkout"}
	for _, tc := range []struct {
		kind Kind
		app  string
		want bool
	}{
		{ExpiryReminder, "checkout", true},
		{ExpiryReminder, "search", false},
		{ExpiryReminder, "", true},
		{DrillFailed, "checkout", false},
	} {
		if got := ch.Wants(tc.kind, tc.app); got != tc.want {
			t.Errorf("%s of %q: %v", tc.kind, tc.app, got)
		}
	}
	all := Channel{Events: AllKinds}
	if !all.Wants(Kind("some.future_kind"), "x") {
		t.Error(`"*" missed a kind`)
	}
}

// TestRedactURL: audit events keep a webhook URL's scheme and host only.
func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://hooks.slack.com/services/T0/B0/XXXX": "https://hooks.slack.com/…",
		"http://10.0.0.7:9000":                        "http://10.0.0.7:9000",
		"https://alerts.example.com/hook?token=abc":   "https://alerts.example.com/…",
		"::nope": "…",
	} {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestSlackBody: a Slack-format delivery has text and blocks, escapes
// mrkdwn's <, > and & in its text as in its blocks (a title cannot ping
// a channel), and carries the idempotency key in its context.
func TestSlackBody(t *testing.T) {
	e := row{EventKey: "expiry/checkout/reco@1/expired", Kind: string(ExpiryReminder), Target: "switch/checkout/reco",
		Title: "checkout/reco is on past its expiry <!channel>", Body: "reason: <!channel> & co", Data: "{}", CreatedAt: time.Unix(1733050000, 0)}
	b, err := e.body(FormatSlack, "prod")
	if err != nil {
		t.Fatal(err)
	}
	var msg struct {
		Text   string `json:"text"`
		Blocks []struct {
			Type     string `json:"type"`
			Text     struct{ Text string }
			Elements []struct{ Text string }
		} `json:"blocks"`
	}
	if err := json.Unmarshal(b, &msg); err != nil {
		t.Fatal(err)
	}
	if msg.Text != "[prod] checkout/reco is on past its expiry &lt;!channel&gt;" || len(msg.Blocks) != 2 {
		t.Fatalf("message %s", b)
	}
	if !strings.Contains(msg.Blocks[0].Text.Text, "&lt;!channel&gt; &amp; co") || strings.Contains(string(b), "<!channel>") {
		t.Fatalf("not escaped: %s", b)
	}
	if !strings.Contains(msg.Blocks[1].Elements[0].Text, "id expiry/checkout/reco@1/expired") {
		t.Fatalf("no idempotency key in the context: %s", b)
	}
}
