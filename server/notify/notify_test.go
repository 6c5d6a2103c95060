package notify_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"gorm.io/gorm"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/internal/pgtest"
	"github.com/switchyard-io/switchyard/internal/servertest"
	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/egress"
	"github.com/switchyard-io/switchyard/server/notify"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var admin = server.Actor{Name: "token:admin", Kind: audit.ActorToken, Role: server.RoleAdmin}

const secret = "a-secret-of-at-least-16"

// clock is a settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
	return c.t
}

// fixture is a service on a real database, leading term 1.
type fixture struct {
	svc   *server.Service
	db    *gorm.DB
	clock *clock
	term  server.Term
	// egress allowlists the receivers the test saves channels to, and
	// nothing else.
	egress *egress.Guard
}

func newFixture(t *testing.T, url string) *fixture {
	t.Helper()
	db := servertest.OpenDB(t, url, t.TempDir())
	f := &fixture{db: db, clock: &clock{t: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)}, term: server.Term{Rev: 1, Holder: "test"}, egress: egress.Strict()}
	f.svc = server.NewService(db, nil, server.WithClock(f.clock.Now))
	f.claim(t, f.term)
	return f
}

func (f *fixture) claim(t *testing.T, term server.Term) {
	t.Helper()
	if err := f.svc.ClaimTerm(context.Background(), term); err != nil {
		t.Fatal(err)
	}
}

// enqueue records an event as a job would, in a transaction of its own.
func (f *fixture) enqueue(t *testing.T, key string, kind notify.Kind) {
	t.Helper()
	err := f.db.Transaction(func(tx *gorm.DB) error {
		return notify.Enqueue(tx, notify.Event{Key: key, Kind: kind, App: "checkout", Target: "switch/checkout/reco", Title: "checkout/reco expired", At: f.clock.Now()})
	})
	if err != nil {
		t.Fatal(err)
	}
}

// receiver is a webhook receiver that checks every request's signature
// the way docs/expiry.md tells receivers to, and answers from a script.
type receiver struct {
	t      *testing.T
	srv    *httptest.Server
	mu     sync.Mutex
	got    []request
	script []int // status codes of the first answers; 200 after them
	seen   map[string]bool
}

type request struct {
	key      string
	attempt  string
	accepted bool // a new idempotency key, answered 2xx
	body     []byte
}

func newReceiver(t *testing.T, script ...int) *receiver {
	r := &receiver{t: t, script: script, seen: map[string]bool{}}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	ts := req.Header.Get(notify.HeaderTimestamp)
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts + "." + string(body)))
	if want := "sha256=" + hex.EncodeToString(m.Sum(nil)); !hmac.Equal([]byte(want), []byte(req.Header.Get(notify.HeaderSignature))) {
		r.t.Errorf("bad signature %q on %s", req.Header.Get(notify.HeaderSignature), body)
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	var p notify.Payload
	if err := json.Unmarshal(body, &p); err != nil || p.IdempotencyKey == "" || p.IdempotencyKey != req.Header.Get(notify.HeaderIdempotencyKey) {
		r.t.Errorf("payload %s: %v", body, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	status := http.StatusOK
	if len(r.got) < len(r.script) {
		status = r.script[len(r.got)]
	}
	rq := request{key: p.IdempotencyKey, attempt: req.Header.Get(notify.HeaderAttempt), body: body}
	if status < 300 && !r.seen[p.IdempotencyKey] {
		r.seen[p.IdempotencyKey], rq.accepted = true, true
	}
	r.got = append(r.got, rq)
	w.WriteHeader(status)
}

func (r *receiver) requests() []request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]request(nil), r.got...)
}

func (f *fixture) channel(t *testing.T, name, url string, events ...string) {
	t.Helper()
	if strings.HasPrefix(url, "http://127.0.0.1:") { // a receiver this test started
		if err := f.egress.Allow(strings.TrimPrefix(url, "http://")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := notify.New(f.svc, notify.Config{Egress: f.egress}).CreateChannel(context.Background(), admin, notify.ChannelInput{
		Name: name, URL: url, Secret: secret, Events: events, Reason: "test channel"}); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) deliveries(t *testing.T, svc *notify.Service, channel string) []notify.DeliveryView {
	t.Helper()
	list, _, err := svc.Deliveries(context.Background(), notify.DeliveryFilter{Channel: channel})
	if err != nil {
		t.Fatal(err)
	}
	return list
}

// TestRetriesUntilDelivered: a receiver that fails twice (500, 503) then
// succeeds gets three signed requests with the same idempotency key and
// accepts the event once; each retry waits for its backoff (the clock is
// moved by hand) and the log ends delivered after 3 attempts. Events are
// fanned out only to channels whose filter matches. On both databases.
func TestRetriesUntilDelivered(t *testing.T) {
	for _, url := range []string{"", pgtest.NewDatabase(t)} {
		f := newFixture(t, url)
		ctx := context.Background()
		rcv := newReceiver(t, 500, 503)
		other := newReceiver(t)
		f.channel(t, "ops", rcv.srv.URL, string(notify.ExpiryReminder))
		f.channel(t, "drills", other.srv.URL, string(notify.DrillFailed))
		svc := notify.New(f.svc, notify.Config{Egress: f.egress, MinBackoff: time.Minute, MaxBackoff: 10 * time.Minute})
		job := svc.Job()
		f.enqueue(t, "expiry/checkout/reco@1/expired", notify.ExpiryReminder)

		step := func() {
			t.Helper()
			if err := job.Step(ctx, f.term, f.clock.Now()); err != nil {
				t.Fatal(err)
			}
			job.Wait()
		}
		step()
		if n := len(rcv.requests()); n != 1 {
			t.Fatalf("first step: %d requests", n)
		}
		step() // the backoff has not passed: nothing is sent
		if n := len(rcv.requests()); n != 1 {
			t.Fatalf("retried before the backoff passed: %d requests", n)
		}
		d := f.deliveries(t, svc, "ops")
		if len(d) != 1 || d[0].Status != notify.StatusPending || d[0].Attempts != 1 || d[0].ResponseCode != 500 || d[0].NextAttemptAt == nil {
			t.Fatalf("after one failure: %+v", d)
		}
		wait := d[0].NextAttemptAt.Sub(f.clock.Now())
		if wait < 30*time.Second || wait > time.Minute {
			t.Fatalf("first backoff %v, want 30s–1m (1m with equal jitter)", wait)
		}
		for attempt := 2; attempt <= 3; attempt++ {
			f.clock.Add(2 * time.Minute * time.Duration(attempt))
			step()
		}
		got := rcv.requests()
		if len(got) != 3 {
			t.Fatalf("%d requests, want 3", len(got))
		}
		accepted := 0
		for i, r := range got {
			if r.key != "expiry/checkout/reco@1/expired" || r.attempt != strconv.Itoa(i+1) {
				t.Errorf("request %d: key %q attempt %q", i, r.key, r.attempt)
			}
			if string(r.body) != string(got[0].body) {
				t.Errorf("request %d has another body than the first", i)
			}
			if r.accepted {
				accepted++
			}
		}
		if accepted != 1 {
			t.Fatalf("the receiver accepted the event %d times", accepted)
		}
		d = f.deliveries(t, svc, "ops")
		if len(d) != 1 || d[0].Status != notify.StatusDelivered || d[0].Attempts != 3 || d[0].ResponseCode != 200 || d[0].FinishedAt == nil {
			t.Fatalf("log after delivery: %+v", d)
		}
		if n := len(other.requests()); n != 0 || len(f.deliveries(t, svc, "drills")) != 0 {
			t.Fatalf("a channel without expiry.reminder in its filter got %d requests", n)
		}
		t.Logf("%s: delivered on attempt 3 after 500, 503; accepted once", map[bool]string{true: "sqlite", false: "postgres"}[url == ""])
	}
}

// TestGivesUpAfterRetryFor: a receiver that always fails is retried with
// growing backoff until RetryFor, then the delivery is failed for good.
func TestGivesUpAfterRetryFor(t *testing.T) {
	f := newFixture(t, "")
	ctx := context.Background()
	always := make([]int, 30)
	for i := range always {
		always[i] = http.StatusInternalServerError
	}
	rcv := newReceiver(t, always...)
	f.channel(t, "ops", rcv.srv.URL, notify.AllKinds)
	svc := notify.New(f.svc, notify.Config{Egress: f.egress, MinBackoff: time.Minute, MaxBackoff: 8 * time.Minute, RetryFor: 30 * time.Minute})
	job := svc.Job()
	f.enqueue(t, "k1", notify.ExpiryEscalation)
	health := func(want notify.Health) {
		t.Helper()
		if h, err := svc.Health(ctx, f.clock.Now()); err != nil || h != want {
			t.Fatalf("delivery health %+v %v, want %+v", h, err, want)
		}
	}
	health(notify.Health{})
	for i := range 60 {
		if err := job.Step(ctx, f.term, f.clock.Now()); err != nil {
			t.Fatal(err)
		}
		job.Wait()
		if i == 0 {
			health(notify.Health{Retrying: 1}) // the first attempt failed
		}
		f.clock.Add(time.Minute)
	}
	d := f.deliveries(t, svc, "ops")
	if len(d) != 1 || d[0].Status != notify.StatusFailed || d[0].FinishedAt == nil || d[0].Error == "" {
		t.Fatalf("after an hour of failures: %+v", d)
	}
	health(notify.Health{FailedLastHour: 1})
	f.clock.Add(time.Hour)
	health(notify.Health{}) // given up more than an hour ago
	// Waits of 1m, 2m, 4m, then 8m each (half fixed, half jitter), taken
	// at the next step of a minute: 6 attempts fit 30 minutes with the
	// longest waits, 10 with the shortest.
	if n := len(rcv.requests()); n < 6 || n > 10 {
		t.Fatalf("%d attempts within RetryFor 30m", n)
	}
	t.Logf("given up after %d attempts: %s", d[0].Attempts, d[0].Error)
}

// TestHangingReceiverHoldsOneSlot: a receiver that never answers holds
// its requests for Timeout; a step returns at once, and another channel's
// delivery made at the same moment is delivered meanwhile.
func TestHangingReceiverHoldsOneSlot(t *testing.T) {
	f := newFixture(t, pgtest.NewDatabase(t))
	ctx := context.Background()
	hole := blackHole(t)
	rcv := newReceiver(t)
	f.channel(t, "hole", "http://"+hole, notify.AllKinds)
	f.channel(t, "ops", rcv.srv.URL, notify.AllKinds)
	svc := notify.New(f.svc, notify.Config{Egress: f.egress, Timeout: 3 * time.Second})
	job := svc.Job()
	f.enqueue(t, "k1", notify.ExpiryReminder)
	began := time.Now()
	if err := job.Step(ctx, f.term, f.clock.Now()); err != nil {
		t.Fatal(err)
	}
	stepTook := time.Since(began)
	servertest.Eventually(t, 2*time.Second, "the other channel's delivery", func() bool {
		d := f.deliveries(t, svc, "ops")
		return len(d) == 1 && d[0].Status == notify.StatusDelivered
	})
	delivered := time.Since(began)
	if d := f.deliveries(t, svc, "hole"); len(d) != 1 || d[0].Status != notify.StatusSending {
		t.Fatalf("the hanging delivery: %+v", d)
	}
	job.Wait()
	timedOut := time.Since(began)
	d := f.deliveries(t, svc, "hole")
	if len(d) != 1 || d[0].Status != notify.StatusPending || d[0].Error != "no answer within 3s" {
		t.Fatalf("after the timeout: %+v", d)
	}
	t.Logf("step returned in %v; the other channel had its delivery after %v; the hanging request ended after %v (%s)",
		stepTook.Round(time.Millisecond), delivered.Round(time.Millisecond), timedOut.Round(time.Millisecond), d[0].Error)
	if stepTook > time.Second {
		t.Fatalf("the step waited %v for a receiver", stepTook)
	}
}

// blackHole accepts connections and never answers; it returns its address.
func blackHole(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// TestNewLeaderRetriesUnfinished: a leader dies in the middle of a
// request (its term's context ends, its outcome is never recorded); the
// next leader claims a newer term and sends the delivery again once its
// lease has passed: the receiver sees the event twice, with the same
// idempotency key, and keeps it once. The dead leader's late outcome
// cannot be recorded.
func TestNewLeaderRetriesUnfinished(t *testing.T) {
	f := newFixture(t, pgtest.NewDatabase(t))
	rcv := newReceiver(t)
	var hold atomic.Bool
	hold.Store(true)
	release := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if hold.Load() {
			<-release
		}
		rcv.serve(w, req)
	}))
	t.Cleanup(slow.Close)
	t.Cleanup(func() { close(release) })
	f.channel(t, "ops", slow.URL, notify.AllKinds)
	svc := notify.New(f.svc, notify.Config{Egress: f.egress, Timeout: 2 * time.Second})
	f.enqueue(t, "k1", notify.ExpiryReminder)

	oldCtx, die := context.WithCancel(context.Background())
	oldJob := svc.Job()
	if err := oldJob.Step(oldCtx, f.term, f.clock.Now()); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, 2*time.Second, "the request is under way", func() bool {
		d := f.deliveries(t, svc, "ops")
		return len(d) == 1 && d[0].Status == notify.StatusSending
	})
	die()
	oldJob.Wait()
	hold.Store(false)

	next := server.Term{Rev: 2, Holder: "next"}
	f.claim(t, next)
	newJob := svc.Job()
	ctx := context.Background()
	if err := newJob.Step(ctx, next, f.clock.Now()); err != nil {
		t.Fatal(err)
	}
	newJob.Wait()
	if n := len(rcv.requests()); n != 0 {
		t.Fatalf("resent before the lease passed: %d", n)
	}
	f.clock.Add(time.Minute)
	if err := newJob.Step(ctx, next, f.clock.Now()); err != nil {
		t.Fatal(err)
	}
	newJob.Wait()
	d := f.deliveries(t, svc, "ops")
	if len(d) != 1 || d[0].Status != notify.StatusDelivered || d[0].Attempts != 2 {
		t.Fatalf("after the new leader: %+v", d)
	}
	if got := rcv.requests(); len(got) != 1 || got[0].attempt != "2" || !got[0].accepted {
		t.Fatalf("the receiver got %+v", got)
	}
	// The old term can no longer write.
	if _, err := f.svc.InTerm(ctx, f.term, func(*server.JobTx) error { return nil }); !errors.Is(err, server.ErrNotLeader) {
		t.Fatalf("the old term still commits: %v", err)
	}
}

// TestSendTest: "send test" posts one signed channel.test event to that
// channel only, at once, and logs it; a failing receiver is logged as
// failed without retries.
func TestSendTest(t *testing.T) {
	f := newFixture(t, "")
	ctx := context.Background()
	ok, bad := newReceiver(t), newReceiver(t, 500)
	f.channel(t, "ok", ok.srv.URL, string(notify.ChannelTest))
	f.channel(t, "bad", bad.srv.URL, string(notify.ChannelTest))
	svc := notify.New(f.svc, notify.Config{Egress: f.egress})
	d, err := svc.SendTest(ctx, admin, "ok", server.Change{Reason: "check the receiver"})
	if err != nil || d.Status != notify.StatusDelivered || d.Kind != string(notify.ChannelTest) || d.ResponseCode != 200 {
		t.Fatalf("test of a good channel: %+v %v", d, err)
	}
	if n := len(ok.requests()); n != 1 || len(bad.requests()) != 0 {
		t.Fatalf("requests: ok %d, bad %d", n, len(bad.requests()))
	}
	d, err = svc.SendTest(ctx, admin, "bad", server.Change{Reason: "check the receiver"})
	if err != nil || d.Status != notify.StatusFailed || d.ResponseCode != 500 || d.Attempts != 1 {
		t.Fatalf("test of a failing channel: %+v %v", d, err)
	}
	// The job does not fan a test out again.
	job := svc.Job()
	if err := job.Step(ctx, f.term, f.clock.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	job.Wait()
	if len(ok.requests()) != 1 || len(bad.requests()) != 1 {
		t.Fatalf("a test was sent again: ok %d, bad %d", len(ok.requests()), len(bad.requests()))
	}
	// The audit log, which viewers read, has neither the secret nor the
	// URL's path (Slack's carry a token).
	f.channel(t, "slack", "https://hooks.slack.com/services/T0/B0/TOKEN123", notify.AllKinds)
	evs, _, err := f.svc.ListAudit(ctx, audit.Filter{Target: "channel/slack"})
	if err != nil || len(evs) != 1 || evs[0].Action != audit.ChannelCreate {
		t.Fatalf("audit of the channel: %+v %v", evs, err)
	}
	if strings.Contains(evs[0].After, "TOKEN123") || strings.Contains(evs[0].After, secret) || !strings.Contains(evs[0].After, `"url":"https://hooks.slack.com/…"`) {
		t.Fatalf("the audit event shows too much: %s", evs[0].After)
	}
	viewer := server.Actor{Name: "v", Kind: audit.ActorToken, Role: server.RoleViewer}
	if _, err := svc.SendTest(ctx, viewer, "ok", server.Change{Reason: "check the receiver"}); !errors.Is(err, server.ErrForbidden) {
		t.Fatalf("a viewer sent a test: %v", err)
	}
	// Each test send is audited with its reason; one without a reason is
	// refused before anything is sent.
	tests, _, err := f.svc.ListAudit(ctx, audit.Filter{Target: "channel/ok", Action: audit.ChannelTest})
	if err != nil || len(tests) != 1 || tests[0].Action != audit.ChannelTest || tests[0].Reason != "check the receiver" {
		t.Fatalf("audit of the test sends: %+v %v", tests, err)
	}
	var ve *server.ValidationError
	if _, err := svc.SendTest(ctx, admin, "ok", server.Change{Reason: " "}); !errors.As(err, &ve) || len(ok.requests()) != 1 {
		t.Fatalf("a test without a reason: %v, %d requests", err, len(ok.requests()))
	}
}

// TestPrune: Prune (run by the retention job) drops finished deliveries
// and sent events older than the cut; what is younger, unfinished or not
// yet dispatched stays.
func TestPrune(t *testing.T) {
	f := newFixture(t, pgtest.NewDatabase(t))
	ctx := context.Background()
	rcv := newReceiver(t)
	f.channel(t, "ops", rcv.srv.URL, notify.AllKinds)
	svc := notify.New(f.svc, notify.Config{Egress: f.egress})
	job := svc.Job()
	step := func() {
		t.Helper()
		if err := job.Step(ctx, f.term, f.clock.Now()); err != nil {
			t.Fatal(err)
		}
		job.Wait()
	}
	f.enqueue(t, "old", notify.ExpiryReminder)
	step() // delivered
	f.clock.Add(30 * time.Hour)
	f.enqueue(t, "young", notify.ExpiryReminder)
	var deliveries, pruned int64
	err := f.db.Transaction(func(tx *gorm.DB) (err error) {
		cut := f.clock.Now().Add(-24 * time.Hour)
		if deliveries, err = notify.PruneDeliveries(tx, cut, 100); err != nil {
			return err
		}
		pruned, err = notify.PruneEvents(tx, cut, 100)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	step() // delivers "young"
	var events []string
	f.db.Table("notifications").Order("id").Pluck("event_key", &events)
	if d := f.deliveries(t, svc, "ops"); deliveries != 1 || pruned != 1 || len(events) != 1 || events[0] != "young" || len(d) != 1 || d[0].EventKey != "young" {
		t.Fatalf("after pruning %d deliveries and %d events: events %v, deliveries %+v", deliveries, pruned, events, d)
	}
}
