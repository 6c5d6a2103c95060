package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/internal/servertest"
	"github.com/switchyard-io/switchyard/sdk"
	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/console"
	"github.com/switchyard-io/switchyard/server/finding"
	"github.com/switchyard-io/switchyard/server/notify"
)

// offsetClock is the consoles' injected clock: real time moved by an
// offset the test sets, so time still flows (the SDK's clocks are real).
type offsetClock struct{ off atomic.Int64 }

func (c *offsetClock) now() time.Time      { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *offsetClock) set(d time.Duration) { c.off.Store(int64(d)) }

// fastExpiry makes the expiry and findings jobs look every 100 ms.
func fastExpiry(cfg *console.Config) { cfg.ExpiryInterval = 100 * time.Millisecond }

const hookSecret = "receiver-secret-0123456789"

// hook is a webhook receiver on loopback that verifies every request as
// docs/expiry.md tells receivers to: the HMAC-SHA256 of "<timestamp>.<body>"
// with the channel's secret, a timestamp within 5 minutes of its clock,
// and an idempotency key it has not accepted before. The first fail
// requests of each event are answered 500.
type hook struct {
	t    *testing.T
	srv  *httptest.Server
	now  func() time.Time
	fail int

	mu    sync.Mutex
	got   []hookReq
	seen  map[string]bool
	tries map[string]int
}

type hookReq struct {
	key, kind, attempt string
	accepted           bool
	payload            notify.Payload
}

// newHook starts a receiver and allowlists it on e's consoles.
func newHook(t *testing.T, e *env, now func() time.Time, fail int) *hook {
	h := &hook{t: t, now: now, fail: fail, seen: map[string]bool{}, tries: map[string]int{}}
	h.srv = httptest.NewServer(http.HandlerFunc(h.serve))
	t.Cleanup(h.srv.Close)
	e.allowEgress(h.srv.Listener.Addr().String())
	return h
}

func (h *hook) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	// The receiver does what docs/expiry.md tells receivers to: notify.Verify
	// (server/notify's own tests check the signature by hand).
	if err := notify.Verify(hookSecret, r.Header, body, h.now(), notify.DefaultTolerance); err != nil {
		h.t.Errorf("receiver: %v on %s", err, body)
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	var p notify.Payload
	if err := json.Unmarshal(body, &p); err != nil || p.IdempotencyKey == "" {
		h.t.Errorf("receiver: payload %s: %v", body, err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	req := hookReq{key: p.IdempotencyKey, kind: string(p.Kind), attempt: r.Header.Get(notify.HeaderAttempt), payload: p}
	if h.tries[p.IdempotencyKey]++; h.tries[p.IdempotencyKey] <= h.fail {
		h.got = append(h.got, req)
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	if !h.seen[p.IdempotencyKey] {
		h.seen[p.IdempotencyKey], req.accepted = true, true
	}
	h.got = append(h.got, req)
}

func (h *hook) requests() []hookReq {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]hookReq(nil), h.got...)
}

func (h *hook) accepted(kind string) []hookReq {
	var out []hookReq
	for _, r := range h.requests() {
		if r.accepted && r.kind == kind {
			out = append(out, r)
		}
	}
	return out
}

// addChannel creates a channel through the API.
func addChannel(t *testing.T, c *console.Console, name, url string, events ...string) {
	t.Helper()
	ev, _ := json.Marshal(events)
	mustStatus(t, call(t, c, "POST", "/api/v1/channels", adminToken,
		fmt.Sprintf(`{"name":%q,"url":%q,"secret":%q,"events":%s,"reason":"test channel"}`, name, url, hookSecret, ev)), 201)
}

// switchOn creates app checkout's switch name with max_on and policy, and
// turns it on, through the API.
func switchOn(t *testing.T, c *console.Console, name, maxOn, policy string) {
	t.Helper()
	mustStatus(t, call(t, c, "POST", "/api/v1/apps/checkout/switches", adminToken,
		fmt.Sprintf(`{"name":%q,"level":"L3","max_on":%q,"expiry_policy":%q,"owner":"team-checkout","reason":"seed"}`, name, maxOn, policy)), 201)
	mustStatus(t, call(t, c, "POST", "/api/v1/apps/checkout/switches/"+name+"/on", adminToken, `{"reason":"INC-42 recommendations time out"}`), 200)
}

// checkoutState is the state of switch checkout/name.
func checkoutState(t *testing.T, c *console.Console, name string) string {
	t.Helper()
	sw, err := c.Service.GetSwitch(context.Background(), "checkout", name)
	if err != nil {
		t.Fatal(err)
	}
	return sw.State
}

// expiryEvents returns the audit events of the expiry actor on a switch.
func expiryEvents(t *testing.T, c *console.Console, name string) []audit.Event {
	t.Helper()
	evs, _, err := c.Service.ListAudit(context.Background(), audit.Filter{Target: "switch/checkout/" + name, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var out []audit.Event
	for _, ev := range evs {
		if ev.ActorKind == audit.ActorExpiry {
			out = append(out, ev)
		}
	}
	return out
}

// TestExpiryAutoOff: a switch with max_on 1h and policy auto_off, the
// clock moved past its expiry: the leader's expiry job turns it off, every
// SDK client watching it sees it off, and the audit log has one event of
// actor kind expiry with its cause — still one after later steps (a
// second switch expiring later is the witness that they ran).
func TestExpiryAutoOff(t *testing.T) {
	e := newEnv(t)
	clock := &offsetClock{}
	c := e.startWith([]console.Option{console.WithClock(clock.now)}, fastExpiry)
	waitLeader(t, c)
	switchOn(t, c, "reco", "1h", server.ExpiryAutoOff)
	switchOn(t, c, "witness", "2h", server.ExpiryAutoOff)

	ctx := context.Background()
	const n = 5
	handles := make([]*sdk.Handle, n)
	for i := range handles {
		cl, err := sdk.New(ctx, sdk.Config{Endpoints: []string{e.etcd.Endpoint}, App: "checkout", InstanceID: fmt.Sprintf("inst-%d", i), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cl.Close() })
		handles[i] = cl.Switch("reco")
	}
	allOn := func(want bool) func() bool {
		return func() bool {
			for _, h := range handles {
				if h.On(ctx) != want {
					return false
				}
			}
			return true
		}
	}
	servertest.Eventually(t, 10*time.Second, "every client sees reco on", allOn(true))
	if len(expiryEvents(t, c, "reco")) != 0 {
		t.Fatal("the expiry job acted before the expiry")
	}

	clock.set(time.Hour + time.Second)
	moved := time.Now()
	servertest.Eventually(t, 10*time.Second, "every client sees reco off", allOn(false))
	took := time.Since(moved)
	clock.set(2*time.Hour + time.Second)
	servertest.Eventually(t, 10*time.Second, "the witness is turned off by a later step", func() bool { return checkoutState(t, c, "witness") == "off" })

	evs := expiryEvents(t, c, "reco")
	if len(evs) != 1 {
		t.Fatalf("%d expiry events on reco, want 1: %+v", len(evs), evs)
	}
	ev := evs[0]
	if ev.Action != audit.SwitchOff || ev.Actor != audit.ActorExpiry || ev.Cause != "expiry/checkout/reco" || !strings.Contains(ev.Reason, "policy auto_off") {
		t.Fatalf("the expiry's audit event: %+v", ev)
	}
	t.Logf("clock moved past the expiry: all %d SDK clients saw reco off %v later; one audit event: %s by %s (%s), cause %s, %q",
		n, took.Round(time.Millisecond), ev.Action, ev.Actor, ev.ActorKind, ev.Cause, ev.Reason)
}

// TestExpiryRemind: a switch with max_on 1h and policy remind, the clock
// moved past its expiry: an expired_on finding, one signed delivery to the
// reminder channel's receiver (which verifies it), nothing turned off;
// no escalation until the configured time has passed, then one to the
// escalation channel; renewing through the API resolves the finding and
// says who renewed it.
func TestExpiryRemind(t *testing.T) {
	e := newEnv(t)
	clock := &offsetClock{}
	c := e.startWith([]console.Option{console.WithClock(clock.now)}, fastExpiry, func(cfg *console.Config) { cfg.ExpiryEscalateAfter = 30 * time.Minute })
	waitLeader(t, c)
	reminders, escalations := newHook(t, e, clock.now, 0), newHook(t, e, clock.now, 0)
	addChannel(t, c, "team", reminders.srv.URL, string(notify.ExpiryReminder))
	addChannel(t, c, "oncall", escalations.srv.URL, string(notify.ExpiryEscalation))
	switchOn(t, c, "reco", "1h", server.ExpiryRemind)

	clock.set(time.Hour + time.Second)
	moved := time.Now()
	servertest.Eventually(t, 10*time.Second, "one signed reminder delivered", func() bool { return len(reminders.accepted("expiry.reminder")) == 1 })
	delivered := time.Since(moved)
	r := mustStatus(t, call(t, c, "GET", "/api/v1/findings?kind=expired_on&target=switch/checkout/reco", adminToken, ""), 200)
	list, _ := r.Body["findings"].([]any)
	if len(list) != 1 {
		t.Fatalf("expired_on findings: %s", r.Raw)
	}
	f := list[0].(map[string]any)
	if f["severity"] != "warning" || !strings.Contains(f["summary"].(string), "— confirm or turn off") {
		t.Fatalf("the finding: %v", f)
	}
	if n := len(reminders.requests()); n != 1 {
		t.Fatalf("the reminder receiver got %d requests, want 1", n)
	}
	p := reminders.requests()[0].payload
	if p.Data == nil || !strings.Contains(string(p.Data), `"phase":"expired"`) || p.Target != "switch/checkout/reco" {
		t.Fatalf("the reminder: %+v", p)
	}
	if checkoutState(t, c, "reco") != "on" || len(expiryEvents(t, c, "reco")) != 0 {
		t.Fatal("a remind switch was changed by the expiry job")
	}
	if n := len(escalations.requests()); n != 0 {
		t.Fatalf("escalated at the expiry: %d", n)
	}

	clock.set(time.Hour + 31*time.Minute)
	servertest.Eventually(t, 10*time.Second, "one escalation delivered", func() bool { return len(escalations.accepted("expiry.escalation")) == 1 })
	if n := len(reminders.requests()); n != 1 {
		t.Fatalf("the reminder channel got the escalation too: %d", n)
	}

	r = mustStatus(t, call(t, c, "POST", "/api/v1/apps/checkout/switches/reco/renew", adminToken, `{"reason":"INC-42 still open, vendor fix tomorrow"}`), 200)
	if r.str("switch", "state") != "on" {
		t.Fatalf("renew: %s", r.Raw)
	}
	r = mustStatus(t, call(t, c, "GET", "/api/v1/findings?kind=expired_on&state=all&target=switch/checkout/reco", adminToken, ""), 200)
	list, _ = r.Body["findings"].([]any)
	if len(list) != 1 || list[0].(map[string]any)["resolved_at"] == nil || !strings.HasPrefix(list[0].(map[string]any)["resolution"].(string), "renewed by token:bootstrap#1 until ") {
		t.Fatalf("after renewing: %s", r.Raw)
	}
	if evs, _, _ := c.Service.ListAudit(context.Background(), audit.Filter{Target: "switch/checkout/reco", Action: audit.SwitchRenew}); len(evs) != 1 || evs[0].Reason != "INC-42 still open, vendor fix tomorrow" {
		t.Fatalf("renew audit: %+v", evs)
	}
	t.Logf("past the expiry: expired_on finding (%s), one signed reminder delivered %v later, nothing turned off; escalation after 30m; renewed: %s",
		f["severity"], delivered.Round(time.Millisecond), list[0].(map[string]any)["resolution"])
}

// TestDeliveryRetriesAndHangs: a receiver that fails twice then succeeds
// gets each event once after retries (three signed attempts, one
// idempotency key); a receiver that never answers holds its request for
// the full timeout while the expiry job turns the next switch off at its
// usual pace.
func TestDeliveryRetriesAndHangs(t *testing.T) {
	e := newEnv(t)
	clock := &offsetClock{}
	// The hanging request stays open for the whole test.
	c := e.startWith([]console.Option{console.WithClock(clock.now)}, fastExpiry, func(cfg *console.Config) { cfg.NotifyTimeout = time.Minute })
	waitLeader(t, c)
	flaky := newHook(t, e, clock.now, 2)
	hole := blackHole(t)
	e.allowEgress(hole.addr)
	addChannel(t, c, "flaky", flaky.srv.URL, string(notify.ExpiryTurnedOff))
	addChannel(t, c, "hole", "http://"+hole.addr, string(notify.ExpiryTurnedOff))
	switchOn(t, c, "first", "1h", server.ExpiryAutoOff)
	switchOn(t, c, "second", "90m", server.ExpiryAutoOff)

	clock.set(time.Hour + time.Second)
	servertest.Eventually(t, 10*time.Second, "first is turned off", func() bool { return checkoutState(t, c, "first") == "off" })
	servertest.Eventually(t, 10*time.Second, "the hanging receiver holds a request", func() bool { return hole.open() >= 1 })
	held := time.Now()

	// Retries: each backoff (5s doubling) passes when the clock moves.
	for i := 1; i <= 10 && len(flaky.accepted("expiry.turned_off")) < 1; i++ {
		before := len(flaky.requests())
		clock.set(time.Hour + time.Duration(i)*time.Minute)
		servertest.Eventually(t, 10*time.Second, "the next attempt", func() bool {
			return len(flaky.requests()) > before || len(flaky.accepted("expiry.turned_off")) >= 1
		})
	}

	// Meanwhile the hanging request is still open: the expiry job acts on
	// the next switch at its usual pace.
	clock.set(90*time.Minute + time.Second)
	moved := time.Now()
	servertest.Eventually(t, 10*time.Second, "second is turned off", func() bool { return checkoutState(t, c, "second") == "off" })
	second := time.Since(moved)
	heldFor := time.Since(held)
	if hole.accepted.Load() != 1 || hole.open() != 1 {
		t.Fatalf("the hanging request ended (%d accepted, %d open): the measurement says nothing", hole.accepted.Load(), hole.open())
	}
	if second > 2*time.Second {
		t.Fatalf("the expiry job took %v to turn the second switch off while a receiver hung", second)
	}
	for i := 1; i <= 10 && len(flaky.accepted("expiry.turned_off")) < 2; i++ {
		before := len(flaky.requests())
		clock.set(90*time.Minute + time.Duration(i)*time.Minute)
		servertest.Eventually(t, 10*time.Second, "the next attempt", func() bool {
			return len(flaky.requests()) > before || len(flaky.accepted("expiry.turned_off")) >= 2
		})
	}
	servertest.Eventually(t, 10*time.Second, "both events delivered to the flaky receiver", func() bool { return len(flaky.accepted("expiry.turned_off")) == 2 })
	attempts := map[string][]string{}
	for _, r := range flaky.requests() {
		attempts[r.key] = append(attempts[r.key], r.attempt)
	}
	for key, a := range attempts {
		if strings.Join(a, ",") != "1,2,3" {
			t.Errorf("event %s reached the flaky receiver as attempts %v, want 1,2,3", key, a)
		}
	}
	// The log says so once each outcome is recorded.
	var log response
	servertest.Eventually(t, 10*time.Second, "the delivery log shows both delivered after 3 attempts", func() bool {
		log = mustStatus(t, call(t, c, "GET", "/api/v1/deliveries?channel=flaky", adminToken, ""), 200)
		list, _ := log.Body["deliveries"].([]any)
		for _, d := range list {
			if m := d.(map[string]any); m["status"] != "delivered" || m["attempts"] != float64(3) || m["response_code"] != float64(200) {
				return false
			}
		}
		return len(list) == 2
	})
	if d := mustStatus(t, call(t, c, "GET", "/api/v1/deliveries?channel=hole", adminToken, ""), 200); !strings.Contains(d.Raw, `"status":"sending"`) {
		t.Fatalf("the hanging delivery: %s", d.Raw)
	}
	t.Logf("a receiver had hung for %v (its one request still open) when the expiry job turned the next switch off %v after its expiry; the flaky receiver got %d events as attempts 1,2,3 and accepted each once",
		heldFor.Round(time.Millisecond), second.Round(time.Millisecond), len(attempts))
}

// hole is a receiver that accepts connections, reads what comes and never
// answers.
type hole struct {
	addr     string
	accepted atomic.Int64 // connections accepted
	closed   atomic.Int64 // of them, closed by the console
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    []net.Conn
}

// open counts the connections the console still waits on.
func (h *hole) open() int64 { return h.accepted.Load() - h.closed.Load() }

func blackHole(t *testing.T) *hole {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &hole{addr: ln.Addr().String()}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			h.mu.Lock()
			h.conns = append(h.conns, c)
			h.mu.Unlock()
			h.accepted.Add(1)
			h.wg.Add(1)
			go func() {
				defer h.wg.Done()
				_, _ = io.Copy(io.Discard, c) // until the console hangs up
				h.closed.Add(1)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		h.mu.Lock()
		for _, c := range h.conns {
			c.Close()
		}
		h.mu.Unlock()
		h.wg.Wait()
	})
	return h
}

// TestNeverRead: with instances of checkout reporting signals for 31 days
// (the console's clock starts 31 days back), a switch no client evaluates
// gets a never_read finding and one that is read does not; once a client
// evaluates it, the finding resolves, saying when it was read. no_owner
// follows the owner the same way.
func TestNeverRead(t *testing.T) {
	e := newEnv(t)
	clock := &offsetClock{}
	clock.set(-31 * 24 * time.Hour)
	c := e.startWith([]console.Option{console.WithClock(clock.now)}, fastExpiry)
	waitLeader(t, c)
	for _, name := range []string{"ghost", "used"} {
		mustStatus(t, call(t, c, "POST", "/api/v1/apps/checkout/switches", adminToken, fmt.Sprintf(`{"name":%q,"level":"L3","reason":"seed"}`, name)), 201)
	}
	ctx := context.Background()
	cl, err := sdk.New(ctx, sdk.Config{Endpoints: []string{e.etcd.Endpoint}, App: "checkout", InstanceID: "inst-1", ReportInterval: time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	cl.Switch("used").On(ctx)
	servertest.Eventually(t, 15*time.Second, "the fleet sees used read", func() bool { return c.Fleet.Switch("checkout", "used").LastRead != nil })
	watched := func(name string) bool {
		var n int64
		c.DB.Table("switch_reads").Where("app = ? AND name = ?", "checkout", name).Count(&n)
		return n == 1
	}
	servertest.Eventually(t, 10*time.Second, "the findings job watches ghost's reads", func() bool { return watched("ghost") })
	if len(openFindings(t, c, finding.NeverRead)) != 0 {
		t.Fatal("never_read before 30 days of watching")
	}

	clock.set(0)
	servertest.Eventually(t, 10*time.Second, "never_read opens for ghost", func() bool { return len(openFindings(t, c, finding.NeverRead)) == 1 })
	f := openFindings(t, c, finding.NeverRead)[0]
	if f.Target != "switch/checkout/ghost" || f.Severity != finding.Warning {
		t.Fatalf("never_read: %+v", f)
	}
	if n := len(openFindings(t, c, finding.NoOwner)); n != 2 {
		t.Fatalf("%d no_owner findings, want 2", n)
	}

	cl.Switch("ghost").On(ctx)
	read := time.Now()
	servertest.Eventually(t, 15*time.Second, "never_read resolves once a client reads ghost", func() bool { return len(openFindings(t, c, finding.NeverRead)) == 0 })
	took := time.Since(read)
	all, err := finding.List(c.DB, finding.Filter{Kind: finding.NeverRead})
	if err != nil || len(all) != 1 || !strings.HasPrefix(all[0].Resolution, "read by an instance at ") {
		t.Fatalf("resolved never_read: %+v %v", all, err)
	}
	mustStatus(t, call(t, c, "PATCH", "/api/v1/apps/checkout/switches/ghost", adminToken, `{"owner":"team-recs","reason":"owned"}`), 200)
	servertest.Eventually(t, 10*time.Second, "no_owner resolves for ghost", func() bool { return len(openFindings(t, c, finding.NoOwner)) == 1 })
	t.Logf("never_read opened for the switch no client evaluates (%q); resolved %v after a client read it: %q",
		f.Summary, took.Round(time.Millisecond), all[0].Resolution)
}

func openFindings(t *testing.T, c *console.Console, kind finding.Kind) []finding.Finding {
	t.Helper()
	list, err := finding.List(c.DB, finding.Filter{Kind: kind, Open: true})
	if err != nil {
		t.Fatal(err)
	}
	return list
}

// TestExpiryAcrossLeaderChange: five switches expired an hour ago (three
// auto_off, two remind); the leader, a child process, acts on them in
// order until one whose row the test holds locked, and is SIGKILLed there,
// mid-transaction. The other console, a follower until then, has not
// acted; it takes over and finishes. Each auto_off switch is turned off
// exactly once (one audit event of actor expiry), each remind switch has
// exactly one expired_on finding and one reminder, and the audit chain
// verifies.
func TestExpiryAcrossLeaderChange(t *testing.T) {
	e := newEnv(t)
	// Turned on two hours ago with max_on 1h: expired an hour ago.
	back := &offsetClock{}
	back.set(-2 * time.Hour)
	boot := e.startWith([]console.Option{console.WithClock(back.now)}, func(c *console.Config) { c.ConsoleID = "boot" })
	policies := map[string]string{"a1": server.ExpiryAutoOff, "a2": server.ExpiryRemind, "a3": server.ExpiryAutoOff, "a4": server.ExpiryRemind, "a5": server.ExpiryAutoOff}
	names := []string{"a1", "a2", "a3", "a4", "a5"}
	for _, n := range names {
		switchOn(t, boot, n, "1h", policies[n])
	}
	stop(boot)

	db := servertest.OpenDB(t, e.pgURL, t.TempDir())
	lock := db.Begin()
	if err := lock.Exec("SELECT 1 FROM switches WHERE app = 'checkout' AND name = 'a3' FOR UPDATE").Error; err != nil {
		t.Fatal(err)
	}
	released := false
	release := func() {
		if !released {
			released = true
			lock.Rollback()
		}
	}
	t.Cleanup(release)

	dying := e.startProcess("dying", "SWITCHYARD_EXPIRY_INTERVAL=100ms")
	servertest.Eventually(t, 15*time.Second, "the process leads", func() bool { return electionLeader(e) == "dying" })
	survivor := e.startWith(nil, fastExpiry, func(c *console.Config) { c.ConsoleID = "survivor" })
	state := func(n string) string { return checkoutState(t, survivor, n) }
	servertest.Eventually(t, 15*time.Second, "the leader acts on a1 and a2", func() bool {
		return state("a1") == "off" && len(expiredOn(t, db, "a2")) == 1
	})
	servertest.Eventually(t, 10*time.Second, "the leader waits on a3's row", func() bool {
		var n int64
		db.Raw("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'").Scan(&n)
		return n >= 1
	})
	if state("a3") != "on" || state("a5") != "on" || len(expiredOn(t, db, "a4")) != 0 {
		t.Fatal("someone acted past a3 while the leader was held: a follower acted")
	}
	died := dying.kill(t)
	release()

	servertest.Eventually(t, 20*time.Second, "the survivor finishes", func() bool {
		return state("a3") == "off" && state("a5") == "off" && len(expiredOn(t, db, "a4")) == 1
	})
	took := time.Since(died)
	if survivor.Scheduler.Leading() != true {
		t.Fatal("the survivor finished without leading")
	}
	for _, n := range names {
		evs := expiryEvents(t, survivor, n)
		var reminders int64
		db.Table("notifications").Where("kind = ? AND target = ? AND event_key LIKE ?", "expiry.reminder", "switch/checkout/"+n, "%/expired").Count(&reminders)
		switch policies[n] {
		case server.ExpiryAutoOff:
			if len(evs) != 1 || evs[0].Action != audit.SwitchOff || state(n) != "off" {
				t.Errorf("%s (auto_off): %d expiry events, state %s", n, len(evs), state(n))
			}
		default:
			if len(evs) != 0 || state(n) != "on" || len(allExpiredOn(t, db, n)) != 1 || reminders != 1 {
				t.Errorf("%s (remind): %d expiry events, state %s, %d expired_on findings, %d reminders", n, len(evs), state(n), len(allExpiredOn(t, db, n)), reminders)
			}
		}
	}
	if res, err := survivor.Service.VerifyAudit(context.Background()); err != nil || !res.OK() {
		t.Fatalf("audit chain: %+v %v", res, err)
	}
	t.Logf("leader killed mid-transaction on a3 after acting on a1, a2; the survivor finished a3–a5 %v later; each expiry acted on exactly once", took.Round(time.Millisecond))
}

func expiredOn(t *testing.T, db *gorm.DB, name string) []finding.Finding {
	t.Helper()
	list, err := finding.List(db, finding.Filter{Kind: finding.ExpiredOn, Target: "switch/checkout/" + name, Open: true})
	if err != nil {
		t.Fatal(err)
	}
	return list
}

func allExpiredOn(t *testing.T, db *gorm.DB, name string) []finding.Finding {
	t.Helper()
	list, err := finding.List(db, finding.Filter{Kind: finding.ExpiredOn, Target: "switch/checkout/" + name})
	if err != nil {
		t.Fatal(err)
	}
	return list
}

// TestNeverDrilledFollowsDrills: a switch created 91 days ago (the
// console's clock starts there) that never passed a drill gets a
// never_drilled finding; a real drill run that passes resolves it at the
// findings job's next look at the drills, saying when it passed.
func TestNeverDrilledFollowsDrills(t *testing.T) {
	e := newEnv(t)
	clock := &offsetClock{}
	clock.set(-91 * 24 * time.Hour)
	c := e.startWith([]console.Option{console.WithClock(clock.now)}, fastExpiry, steadyLeader)
	waitLeader(t, c)
	dt := startDrillTarget(t, e, "shop", svcCorrect, 2)
	seedDrill(t, c, "shop", dt.urls[0], "")
	// This test is about the finding: "fast" must not depend on how busy
	// the test machine is.
	mustStatus(t, call(t, c, "PATCH", "/api/v1/apps/shop/drills/reco", adminToken, `{"probes":[{"url":"`+dt.urls[0]+
		`","required_fields":["/items","/source"],"requests":20,"max_p99":"1s"}],"reason":"a loose p99 bound"}`), 200)
	waitInstances(t, c, "shop", 2)
	neverDrilled := func() []finding.Finding {
		list, err := finding.List(c.DB, finding.Filter{Kind: finding.NeverDrilled, Target: "switch/shop/recommend"})
		if err != nil {
			t.Fatal(err)
		}
		return list
	}

	clock.set(0)
	servertest.Eventually(t, 10*time.Second, "never_drilled opens", func() bool { return len(neverDrilled()) == 1 })
	f := neverDrilled()[0]
	if f.ResolvedAt != nil || f.Severity != finding.Warning || !strings.Contains(f.Detail, "never passed a drill") {
		t.Fatalf("never_drilled: %+v", f)
	}

	mustStatus(t, call(t, c, "POST", "/api/v1/apps/shop/drills/reco/runs", adminToken, `{"reason":"quarterly drill"}`), 202)
	run := waitRun(t, c, "shop", 1, 60*time.Second)
	if run.Outcome != "passed" {
		t.Fatalf("the drill did not pass: %s (%s)", run.Outcome, run.Summary)
	}
	// The findings job asks the drills at most every 10 minutes.
	clock.set(11 * time.Minute)
	moved := time.Now()
	servertest.Eventually(t, 10*time.Second, "never_drilled resolves", func() bool { return neverDrilled()[0].ResolvedAt != nil })
	f = neverDrilled()[0]
	if !strings.HasPrefix(f.Resolution, "a drill passed at ") {
		t.Fatalf("resolution %q", f.Resolution)
	}
	t.Logf("never_drilled opened for a 91-day-old switch (%q); resolved %v after the next look at the drills: %q",
		f.Summary, time.Since(moved).Round(time.Millisecond), f.Resolution)
}
