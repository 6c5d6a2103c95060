package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/console"
	"github.com/switchyard-io/switchyard/server/seal"
)

// approvalFixture is a console with a protected app "pay" (the default
// policy: one approval) and an unprotected app "shop", an L5 switch in
// each, and two operators of both apps.
type approvalFixture struct {
	e        *env
	c        *console.Console
	ann, bob string // operator tokens
	now      *shiftClock
}

// shiftClock is the wall clock moved forward by hand (request expiry).
type shiftClock struct {
	mu    sync.Mutex
	shift time.Duration
}

func (s *shiftClock) Now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return time.Now().Add(s.shift)
}
func (s *shiftClock) Add(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.shift += d
}

func newApprovalFixture(t *testing.T, mod ...func(*console.Config)) *approvalFixture {
	f := &approvalFixture{e: newEnv(t), now: &shiftClock{}}
	f.c = f.e.startWith([]console.Option{console.WithClock(f.now.Now)}, mod...)
	for _, name := range []string{"ann", "bob"} {
		r := mustStatus(t, call(t, f.c, "POST", "/api/v1/tokens", adminToken, `{"name":"`+name+`","role":"operator","apps":["pay","shop"],"reason":"test"}`), http.StatusCreated)
		if name == "ann" {
			f.ann = r.str("token")
		} else {
			f.bob = r.str("token")
		}
	}
	mustStatus(t, call(t, f.c, "PUT", "/api/v1/apps/pay/policy", adminToken, `{"protected":true,"reason":"payments need two pairs of eyes"}`), http.StatusOK)
	for _, app := range []string{"pay", "shop"} {
		for _, sw := range []struct{ name, level string }{{"writes", "L5"}, {"recs", "L3"}} {
			mustStatus(t, call(t, f.c, "POST", "/api/v1/apps/"+app+"/switches", f.ann, `{"name":"`+sw.name+`","level":"`+sw.level+`","reason":"setup"}`), http.StatusCreated)
		}
	}
	return f
}

// hold turns pay/writes on as ann and returns the request it became.
func (f *approvalFixture) hold(t *testing.T) int {
	t.Helper()
	r := mustStatus(t, call(t, f.c, "POST", "/api/v1/apps/pay/switches/writes/on", f.ann, `{"reason":"INC-7 queue the writes"}`), http.StatusAccepted)
	if r.str("approval_required", "rule") != "switch.on:L5" || r.str("change_request", "state") != "pending" {
		t.Fatalf("held answer: %s", r.Raw)
	}
	return int(r.num("change_request", "id"))
}

func (f *approvalFixture) state(t *testing.T, app, name string) (string, float64) {
	t.Helper()
	r := mustStatus(t, call(t, f.c, "GET", "/api/v1/apps/"+app+"/switches/"+name, f.ann, ""), http.StatusOK)
	return r.str("switch", "state"), r.num("switch", "version")
}

// count counts rows of table matching where.
func (f *approvalFixture) count(t *testing.T, table, where string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := f.c.DB.Table(table).Where(where, args...).Count(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

// TestApprovalFlow: on a protected app an L5 turn-on becomes a change
// request (nothing applied), the author cannot approve it, another
// operator can; an edit clears the approval; apply applies it once, and
// the requester hears every step on the channels. L3 and turning off
// apply in one call; the unprotected app applies at once.
func TestApprovalFlow(t *testing.T) {
	f := newApprovalFixture(t)
	c := f.c

	// Engaging L1–L3 stays one call, and the unprotected app is unchanged.
	mustStatus(t, call(t, c, "POST", "/api/v1/apps/pay/switches/recs/on", f.ann, `{"reason":"INC-7 shed recs"}`), http.StatusOK)
	mustStatus(t, call(t, c, "POST", "/api/v1/apps/shop/switches/writes/on", f.ann, `{"reason":"INC-7"}`), http.StatusOK)

	id := f.hold(t)
	if st, _ := f.state(t, "pay", "writes"); st != "off" {
		t.Fatalf("a held change was applied: %s", st)
	}
	req := fmt.Sprintf("/api/v1/requests/%d", id)
	mustProblem(t, call(t, c, "POST", req+"/apply", f.ann, ""), http.StatusConflict, "")
	mustProblem(t, call(t, c, "POST", req+"/approve", f.ann, `{"reason":"lgtm"}`), http.StatusForbidden, "")
	mustProblem(t, call(t, c, "POST", req+"/approve", f.bob, `{}`), http.StatusBadRequest, "reason")
	r := mustStatus(t, call(t, c, "POST", req+"/approve", f.bob, `{"reason":"checked the queue depth"}`), http.StatusOK)
	if r.str("request", "state") != "approved" {
		t.Fatalf("after bob's approval: %s", r.Raw)
	}

	// An edit after approval clears it: the approval bound the old content.
	r = mustStatus(t, call(t, c, "PATCH", req, f.ann, `{"toggle":{"reason":"INC-7 queue half the writes","rollout":{"percent":50}},"reason":"only half"}`), http.StatusOK)
	if r.str("request", "state") != "pending" || r.str("request", "approvals") != "[]" {
		t.Fatalf("after the edit: %s", r.Raw)
	}
	mustProblem(t, call(t, c, "PATCH", req, f.bob, `{"toggle":{"reason":"mine now"},"reason":"x"}`), http.StatusForbidden, "")
	mustProblem(t, call(t, c, "POST", req+"/apply", f.ann, ""), http.StatusConflict, "")
	mustStatus(t, call(t, c, "POST", req+"/approve", f.bob, `{"reason":"half is fine"}`), http.StatusOK)

	r = mustStatus(t, call(t, c, "POST", req+"/apply", f.ann, ""), http.StatusOK)
	if r.str("request", "state") != "applied" || r.str("request", "applied_by") == "" {
		t.Fatalf("apply: %s", r.Raw)
	}
	sw := mustStatus(t, call(t, c, "GET", "/api/v1/apps/pay/switches/writes", f.ann, ""), http.StatusOK)
	if sw.str("switch", "state") != "on" || sw.num("switch", "rollout", "percent") != 50 {
		t.Fatalf("switch after apply: %s", sw.Raw)
	}
	mustProblem(t, call(t, c, "POST", req+"/apply", f.bob, ""), http.StatusConflict, "")
	audit := mustStatus(t, call(t, c, "GET", "/api/v1/audit?target=switch/pay/writes&action=switch.on", adminToken, ""), http.StatusOK)
	if !strings.Contains(audit.Raw, fmt.Sprintf(`"cause":"request/%d"`, id)) {
		t.Fatalf("the applied change does not name its request: %s", audit.Raw)
	}
	for kind, want := range map[string]int64{"request.created": 1, "request.approved": 2, "request.updated": 1, "request.applied": 1} {
		if n := f.count(t, "notifications", "kind = ? AND data LIKE ?", kind, "%\"requester\":\"token:ann#%"); n != want {
			t.Errorf("%s notifications naming the requester: %d, want %d", kind, n, want)
		}
	}

	// Every turn-off applies at once.
	mustStatus(t, call(t, c, "POST", "/api/v1/apps/pay/switches/writes/off", f.bob, `{"reason":"INC-7 over"}`), http.StatusOK)
	// Deleting a switch of the protected app is held.
	mustStatus(t, call(t, c, "DELETE", "/api/v1/apps/pay/switches/recs?reason=cleanup", f.ann, ""), http.StatusAccepted)
	mustStatus(t, call(t, c, "GET", "/api/v1/apps/pay/switches/recs", f.ann, ""), http.StatusOK)

	// Limit rules: creating and lowering apply; raising, turning off and
	// deleting are held.
	lim := "/api/v1/apps/pay/limits/charge"
	mustStatus(t, call(t, c, "POST", "/api/v1/apps/pay/limits", f.ann, `{"resource":"charge","kind":"token_bucket","rate":100,"burst":10,"reason":"protect"}`), http.StatusCreated)
	mustStatus(t, call(t, c, "PATCH", lim, f.ann, `{"rate":50,"reason":"tighter"}`), http.StatusOK)
	r = mustStatus(t, call(t, c, "PATCH", lim, f.ann, `{"rate":500,"reason":"looser"}`), http.StatusAccepted)
	if r.str("approval_required", "rule") != "limit.raise" {
		t.Fatalf("raise: %s", r.Raw)
	}
	mustStatus(t, call(t, c, "POST", lim+"/off", f.ann, `{"reason":"off"}`), http.StatusAccepted)
	mustStatus(t, call(t, c, "DELETE", lim+"?reason=gone", f.ann, ""), http.StatusAccepted)
	if l := mustStatus(t, call(t, c, "GET", lim, f.ann, ""), http.StatusOK); l.num("limit", "rate") != 50 || l.str("limit", "state") != "on" {
		t.Fatalf("a held limit change applied: %s", l.Raw)
	}
}

// TestApprovalStaleAndExpired: a request applies only to the version of
// its target it was made for (409 and nothing applied otherwise), and not
// after it expired.
func TestApprovalStaleAndExpired(t *testing.T) {
	f := newApprovalFixture(t)
	c := f.c

	id := f.hold(t)
	req := fmt.Sprintf("/api/v1/requests/%d", id)
	mustStatus(t, call(t, c, "POST", req+"/approve", f.bob, `{"reason":"ok"}`), http.StatusOK)
	mustStatus(t, call(t, c, "PATCH", "/api/v1/apps/pay/switches/writes", f.bob, `{"description":"queues orders","reason":"docs"}`), http.StatusOK)
	_, version := f.state(t, "pay", "writes")
	mustProblem(t, call(t, c, "POST", req+"/apply", f.ann, ""), http.StatusConflict, "version")
	if st, v := f.state(t, "pay", "writes"); st != "off" || v != version {
		t.Fatalf("a stale apply changed the switch: %s v%v", st, v)
	}
	if n := f.count(t, "change_requests", "id = ? AND state = ?", id, "approved"); n != 1 {
		t.Fatal("the failed apply consumed the request")
	}

	id = f.hold(t)
	req = fmt.Sprintf("/api/v1/requests/%d", id)
	mustStatus(t, call(t, c, "POST", req+"/approve", f.bob, `{"reason":"ok"}`), http.StatusOK)
	f.now.Add(61 * time.Minute)
	r := mustProblem(t, call(t, c, "POST", req+"/apply", f.ann, ""), http.StatusConflict, "")
	if !strings.Contains(r.str("detail"), "expired") {
		t.Fatalf("expired apply: %s", r.Raw)
	}
	if st, _ := f.state(t, "pay", "writes"); st != "off" {
		t.Fatal("an expired request applied")
	}
	mustProblem(t, call(t, c, "POST", req+"/approve", f.bob, `{"reason":"late"}`), http.StatusConflict, "")
}

// TestApprovalConcurrentApply: of two applies of one approved request at
// once, exactly one wins.
func TestApprovalConcurrentApply(t *testing.T) {
	f := newApprovalFixture(t)
	for round := range 3 {
		if round > 0 {
			mustStatus(t, call(t, f.c, "POST", "/api/v1/apps/pay/switches/writes/off", f.bob, `{"reason":"again"}`), http.StatusOK)
		}
		id := f.hold(t)
		req := fmt.Sprintf("/api/v1/requests/%d", id)
		mustStatus(t, call(t, f.c, "POST", req+"/approve", f.bob, `{"reason":"ok"}`), http.StatusOK)
		statuses := make(chan int, 2)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for _, tok := range []string{f.ann, f.bob} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				statuses <- call(t, f.c, "POST", req+"/apply", tok, "").Status
			}()
		}
		close(start)
		wg.Wait()
		close(statuses)
		got := map[int]int{}
		for s := range statuses {
			got[s]++
		}
		if got[http.StatusOK] != 1 || got[http.StatusConflict] != 1 {
			t.Fatalf("round %d: statuses %v, want one 200 and one 409", round, got)
		}
		if n := f.count(t, "audit_events", "target = ? AND action = ? AND cause = ?", "switch/pay/writes", "switch.on", fmt.Sprintf("request/%d", id)); n != 1 {
			t.Fatalf("round %d: %d turn-ons recorded, want 1", round, n)
		}
	}
}

// TestBreakGlass: ?break_glass=true applies a held change at once — only
// with a reason — marks its audit event, tells every channel and opens a
// review that the person who broke the glass cannot close.
func TestBreakGlass(t *testing.T) {
	f := newApprovalFixture(t)
	c := f.c
	mustProblem(t, call(t, c, "POST", "/api/v1/apps/pay/switches/writes/on?break_glass=true", f.ann, `{"reason":" "}`), http.StatusBadRequest, "reason")
	if st, _ := f.state(t, "pay", "writes"); st != "off" || f.count(t, "findings", "kind = ?", "break_glass_review") != 0 {
		t.Fatal("a break-glass without a reason changed something")
	}
	mustStatus(t, call(t, c, "POST", "/api/v1/apps/pay/switches/writes/on?break_glass=true", f.ann, `{"reason":"INC-8 the database is melting"}`), http.StatusOK)
	if st, _ := f.state(t, "pay", "writes"); st != "on" {
		t.Fatal("break-glass did not apply")
	}
	if n := f.count(t, "audit_events", "target = ? AND action = ? AND cause = ?", "switch/pay/writes", "switch.on", "break-glass"); n != 1 {
		t.Fatalf("break-glass audit events: %d", n)
	}
	if n := f.count(t, "notifications", "kind = ? AND target = ?", "break_glass", "switch/pay/writes"); n != 1 {
		t.Fatalf("break-glass notifications: %d", n)
	}
	findings := mustStatus(t, call(t, c, "GET", "/api/v1/findings?kind=break_glass_review", adminToken, ""), http.StatusOK)
	list, _ := findings.Body["findings"].([]any)
	if len(list) != 1 {
		t.Fatalf("review findings: %s", findings.Raw)
	}
	id := int64(list[0].(map[string]any)["id"].(float64))
	review := fmt.Sprintf("/api/v1/findings/%d/review", id)
	mustProblem(t, call(t, c, "POST", review, f.ann, `{"note":"I did it, it was fine"}`), http.StatusForbidden, "")
	mustProblem(t, call(t, c, "POST", review, f.bob, `{"note":""}`), http.StatusBadRequest, "reason")
	mustStatus(t, call(t, c, "POST", review, f.bob, `{"note":"checked: the database was at 100 % CPU"}`), http.StatusOK)
	if n := f.count(t, "findings", "id = ? AND resolved_at IS NOT NULL", id); n != 1 {
		t.Fatal("the review is still open")
	}

	// A pending request can be broken through as well.
	mustStatus(t, call(t, c, "POST", "/api/v1/apps/pay/switches/writes/off", f.bob, `{"reason":"over"}`), http.StatusOK)
	rid := f.hold(t)
	mustProblem(t, call(t, c, "POST", fmt.Sprintf("/api/v1/requests/%d/apply", rid), f.ann, `{"break_glass":true}`), http.StatusBadRequest, "reason")
	r := mustStatus(t, call(t, c, "POST", fmt.Sprintf("/api/v1/requests/%d/apply", rid), f.ann, `{"break_glass":true,"reason":"INC-9 no approver awake"}`), http.StatusOK)
	if r.str("request", "state") != "applied" || r.str("request", "break_glass") != "true" {
		t.Fatalf("break-glass apply: %s", r.Raw)
	}
	if n := f.count(t, "findings", "kind = ? AND resolved_at IS NULL", "break_glass_review"); n != 1 {
		t.Fatalf("open reviews: %d", n)
	}
}

// TestApprovalPolicyInput: only admins set policies; bad input names the
// field and writes nothing.
func TestApprovalPolicyInput(t *testing.T) {
	f := newApprovalFixture(t)
	c := f.c
	mustProblem(t, call(t, c, "PUT", "/api/v1/apps/shop/policy", f.ann, `{"protected":true,"reason":"x"}`), http.StatusForbidden, "")
	mustProblem(t, call(t, c, "PUT", "/api/v1/apps/shop/policy", adminToken, `{"protected":true,"approvals":9,"reason":"x"}`), http.StatusBadRequest, "approvals")
	mustProblem(t, call(t, c, "PUT", "/api/v1/apps/shop/policy", adminToken, `{"protected":true,"rules":["switch.off"],"reason":"x"}`), http.StatusBadRequest, "rules[0]")
	mustProblem(t, call(t, c, "PUT", "/api/v1/apps/shop/policy", adminToken, `{"protected":true}`), http.StatusBadRequest, "reason")
	r := mustStatus(t, call(t, c, "GET", "/api/v1/apps/shop/policy", f.ann, ""), http.StatusOK)
	if r.str("policy", "protected") != "false" || f.count(t, "app_policies", "app = ?", "shop") != 0 {
		t.Fatalf("a refused policy was written: %s", r.Raw)
	}
	r = mustStatus(t, call(t, c, "GET", "/api/v1/apps/pay/policy", f.ann, ""), http.StatusOK)
	if r.str("policy", "rules") != `["switch.on:L4","switch.on:L5","switch.delete","limit.raise","limit.delete","trigger.create","trigger.update","drill.create","drill.update"]` {
		t.Fatalf("pay's policy: %s", r.Raw)
	}
}

// TestApprovalAutomation: a new or changed auto-trigger on a protected
// app, and a staged plan that turns an L5 switch on, wait for approval
// like a person's change (the approved request makes them), and what the
// jobs do — a trigger's or rollout's turn-on of
// L5, a drill's, expiry's turn-off — applies under that approval: no job
// is held, and none is a way around a person's hold.
func TestApprovalAutomation(t *testing.T) {
	f := newApprovalFixture(t)
	c := f.c
	rule := `{"name":"cpu","switch":"writes","source":"fleet","query":"degraded_share{switch=\"writes\"}","trigger":{"op":">","threshold":0.5,"for":"1m"},"recover":{"op":"<","threshold":0.1,"for":"1m"},"reason":"automate INC-7"}`
	r := mustStatus(t, call(t, c, "POST", "/api/v1/apps/pay/triggers", f.ann, rule), http.StatusAccepted)
	if r.str("approval_required", "rule") != "trigger.create" {
		t.Fatalf("held trigger: %s", r.Raw)
	}
	mustProblem(t, call(t, c, "GET", "/api/v1/apps/pay/triggers/cpu", f.ann, ""), http.StatusNotFound, "")
	req := fmt.Sprintf("/api/v1/requests/%d", int(r.num("change_request", "id")))
	mustStatus(t, call(t, c, "POST", req+"/approve", f.bob, `{"reason":"thresholds look right"}`), http.StatusOK)
	mustStatus(t, call(t, c, "POST", req+"/apply", f.ann, ""), http.StatusOK)
	mustStatus(t, call(t, c, "GET", "/api/v1/apps/pay/triggers/cpu", f.ann, ""), http.StatusOK)
	// A change of the rule is held too; the unprotected app's is not.
	mustStatus(t, call(t, c, "PATCH", "/api/v1/apps/pay/triggers/cpu", f.ann, `{"trigger":{"threshold":0.9},"reason":"less eager"}`), http.StatusAccepted)
	mustStatus(t, call(t, c, "POST", "/api/v1/apps/shop/triggers", f.ann, strings.Replace(rule, `"cpu"`, `"cpu2"`, 1)), http.StatusCreated)

	// A staged plan that turns the L5 switch on is held; one on an L3
	// switch is not.
	r = mustStatus(t, call(t, c, "POST", "/api/v1/apps/pay/rollouts", f.ann, `{"switch":"writes","template":"default","reason":"stage INC-7"}`), http.StatusAccepted)
	if r.str("approval_required", "rule") != "switch.on:L5" {
		t.Fatalf("held plan: %s", r.Raw)
	}
	plan := fmt.Sprintf("/api/v1/requests/%d", int(r.num("change_request", "id")))
	mustStatus(t, call(t, c, "POST", plan+"/approve", f.bob, `{"reason":"staged is safer"}`), http.StatusOK)
	mustStatus(t, call(t, c, "POST", plan+"/apply", f.ann, ""), http.StatusOK)
	if n := f.count(t, "rollouts", "app = ? AND switch_name = ?", "pay", "writes"); n != 1 {
		t.Fatalf("plans of pay/writes after the apply: %d", n)
	}
	mustStatus(t, call(t, c, "POST", "/api/v1/apps/pay/rollouts", f.ann, `{"switch":"recs","template":"default","reason":"stage recs"}`), http.StatusCreated)

	// The jobs act on a switch of their own here: the plans above are
	// still moving theirs.
	mustStatus(t, call(t, c, "POST", "/api/v1/apps/pay/switches", f.ann, `{"name":"ledger","level":"L5","reason":"setup"}`), http.StatusCreated)
	ctx := context.Background()
	for _, a := range []server.Actor{
		server.JobActor(audit.ActorTrigger, "trigger/pay/cpu"),
		server.JobActor(audit.ActorRollout, "rollout/pay/writes#1"),
		server.JobActor(audit.ActorDrill, "drill/pay/writes#1"),
	} {
		if _, _, err := c.Service.TurnOn(ctx, a, "pay", "ledger", server.Toggle{Reason: "job"}); err != nil {
			t.Fatalf("%s's turn-on of L5 was held: %v", a.Kind, err)
		}
		if _, _, err := c.Service.TurnOff(ctx, server.JobActor(audit.ActorExpiry, "expiry/pay/ledger"), "pay", "ledger", server.Toggle{Reason: "expired"}); err != nil {
			t.Fatalf("expiry's turn-off: %v", err)
		}
	}
	if n := f.count(t, "change_requests", "author IN ?", []string{audit.ActorTrigger, audit.ActorRollout, audit.ActorDrill, audit.ActorExpiry}); n != 0 {
		t.Fatalf("jobs made %d change requests", n)
	}
}

// TestApprovalDrill: a new or changed drill on a protected app waits for
// approval; the request keeps the probes' header values sealed, as the
// drills table does, and the approved request creates the drill with
// them.
func TestApprovalDrill(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "secret.key")
	if _, _, err := seal.Ensure(keyFile); err != nil {
		t.Fatal(err)
	}
	f := newApprovalFixture(t, func(cfg *console.Config) { cfg.SecretKeyFile = keyFile })
	c := f.c
	body := `{"name":"d1","switch":"writes","target":{"percent":5},"duration":"1m","probes":[{"url":"http://svc/x","headers":{"Authorization":"Bearer s3cret-probe-token"}}],"reason":"drill the queue"}`
	// Probe headers are an admin's to set: the admin asks, ann approves.
	r := mustStatus(t, call(t, c, "POST", "/api/v1/apps/pay/drills", adminToken, body), http.StatusAccepted)
	if r.str("approval_required", "rule") != "drill.create" {
		t.Fatalf("held drill: %s", r.Raw)
	}
	id := int(r.num("change_request", "id"))
	if n := f.count(t, "change_requests", "id = ? AND body LIKE ?", id, "%s3cret%"); n != 0 {
		t.Fatal("the request stores a probe header in the clear")
	}
	mustProblem(t, call(t, c, "GET", "/api/v1/apps/pay/drills/d1", f.ann, ""), http.StatusNotFound, "")
	req := fmt.Sprintf("/api/v1/requests/%d", id)
	mustStatus(t, call(t, c, "POST", req+"/approve", f.ann, `{"reason":"5 % is fine"}`), http.StatusOK)
	mustStatus(t, call(t, c, "POST", req+"/apply", adminToken, ""), http.StatusOK)
	mustStatus(t, call(t, c, "GET", "/api/v1/apps/pay/drills/d1", f.ann, ""), http.StatusOK)
	var spec string
	if err := c.DB.Table("drills").Where("app = ? AND name = ?", "pay", "d1").Select("spec").Scan(&spec).Error; err != nil {
		t.Fatal(err)
	}
	keys, err := seal.Load(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	var sp struct {
		Probes []struct{ Headers map[string]string } `json:"probes"`
	}
	_ = json.Unmarshal([]byte(spec), &sp)
	if len(sp.Probes) != 1 {
		t.Fatalf("drill spec: %s", spec)
	}
	if v, err := keys.Open(sp.Probes[0].Headers["Authorization"]); err != nil || v != "Bearer s3cret-probe-token" {
		t.Fatalf("the approved drill's header: %q %v", v, err)
	}
	// A change of the drill is held too.
	mustStatus(t, call(t, c, "PATCH", "/api/v1/apps/pay/drills/d1", f.ann, `{"duration":"2m","reason":"longer"}`), http.StatusAccepted)
}
