package console_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/internal/servertest"
	"github.com/switchyard-io/switchyard/server/api"
	"github.com/switchyard-io/switchyard/server/console"
)

// consistencyFixture is one console holding a few of every resource of
// app shop (switches, limit rules, triggers, drills, staged rollouts,
// channels, deliveries, findings), a few users, tokens, SDK instances (of
// app fleet) and signed audit checkpoints, the same for every resource, so
// the tests below can hold them all to the same rules.
type consistencyFixture struct {
	e *env
	c *console.Console
}

const shop = "/api/v1/apps/shop"

func newConsistencyFixture(t *testing.T) *consistencyFixture {
	e := newEnv(t)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	t.Cleanup(recv.Close)
	e.allowEgress(strings.TrimPrefix(recv.URL, "http://"))
	c := e.start(func(cfg *console.Config) { cfg.ExpiryInterval = 200 * time.Millisecond })
	waitLeader(t, c)
	seed := func(method, path, body string, status int) {
		t.Helper()
		mustStatus(t, call(t, c, method, path, adminToken, body), status)
	}
	cond := `"trigger":{"op":">","threshold":0.5},"recover":{"op":"<","threshold":0.1}`
	for _, n := range []string{"a", "b", "c"} {
		seed("POST", shop+"/switches", `{"name":"`+n+`","level":"L3","reason":"seed"}`, 201)
		seed("POST", shop+"/switches", `{"name":"r`+n+`","level":"L3","reason":"seed"}`, 201)
		seed("POST", shop+"/limits", `{"resource":"GET /`+n+`","kind":"concurrency","max":4,"reason":"seed"}`, 201)
		seed("POST", shop+"/triggers", `{"name":"t-`+n+`","switch":"`+n+`","source":"fleet","query":"degraded_share{switch=\"`+n+`\"}",`+cond+`,"reason":"seed"}`, 201)
		seed("POST", shop+"/drills", `{"name":"d-`+n+`","switch":"`+n+`","target":{"percent":5},"duration":"1m","probes":[{"url":"http://svc/x"}],"reason":"seed"}`, 201)
		seed("POST", shop+"/rollouts", `{"switch":"r`+n+`","template":"default","reason":"seed"}`, 201)
		// Subscribed to nothing the test does: its deliveries are the tests'.
		seed("POST", "/api/v1/channels", `{"name":"ch-`+n+`","url":"`+recv.URL+`/hook","secret":"0123456789abcdef","events":["rollout.done"],"apps":["elsewhere"],"reason":"seed"}`, 201)
		seed("POST", "/api/v1/channels/ch-a/test", `{"reason":"seed"}`, 200)
		seed("POST", "/api/v1/users", `{"username":"u-`+n+`","password":"0123456789ab","role":"viewer","reason":"seed"}`, 201)
		seed("POST", "/api/v1/tokens", `{"name":"tok-`+n+`","role":"viewer","reason":"seed"}`, 201)
		e.stuckInstance("fleet", "i-"+n, 0)
		signCheckpoint(t, c)
	}
	waitInstances(t, c, "fleet", 3)
	// Three change requests: L4 turn-ons an approval policy holds.
	for _, n := range []string{"a", "b", "c"} {
		seed("POST", "/api/v1/apps/guarded/switches", `{"name":"w-`+n+`","level":"L4","owner":"sre","reason":"seed"}`, 201)
	}
	seed("PUT", "/api/v1/apps/guarded/policy", `{"protected":true,"approvals":1,"reason":"seed"}`, 200)
	for _, n := range []string{"a", "b", "c"} {
		seed("POST", "/api/v1/apps/guarded/switches/w-"+n+"/on", `{"reason":"seed"}`, 202)
	}
	seed("POST", "/api/v1/apps/other/switches", `{"name":"lonely","level":"L3","reason":"seed"}`, 201)
	seed("POST", shop+"/drills/d-a/runs", `{"dry_run":true,"reason":"seed"}`, 202)
	// The findings job finds the seven switches without an owner.
	servertest.Eventually(t, 30*time.Second, "no_owner findings of all seven switches", func() bool {
		r := call(t, c, "GET", "/api/v1/findings?kind=no_owner&limit=1000", adminToken, "")
		return r.Status == 200 && len(r.Body["findings"].([]any)) == 7
	})
	return &consistencyFixture{e: e, c: c}
}

// signCheckpoint signs a checkpoint of the audit log as it is with a key
// of the test's: the fixture's console (Postgres, no key file) signs none
// itself, so the list of checkpoints stays still while it is paged.
func signCheckpoint(t *testing.T, c *console.Console) {
	t.Helper()
	key, err := audit.GenerateKeyFile(filepath.Join(t.TempDir(), "audit.key"), audit.Origin("default"))
	if err == nil {
		err = c.DB.Transaction(func(tx *gorm.DB) error {
			_, err := audit.SignCheckpoint(tx, key, audit.Origin("default"), time.Now())
			return err
		})
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestAPIConsistency holds every resource of the API to the same rules.
func TestAPIConsistency(t *testing.T) {
	f := newConsistencyFixture(t)
	// In this order: a patch of an owner changes the findings, durations
	// creates switches.
	t.Run("paging", f.paging)
	t.Run("findings counts", f.findingCounts)
	t.Run("version", f.version)
	t.Run("conflict", f.conflict)
	t.Run("merge patch", f.mergePatch)
	t.Run("durations", f.durations)
}

// paging: every list pages by limit and an opaque cursor; next_cursor is
// there on every page but the last; walking the pages yields the whole
// list once, in order; a bad limit or cursor names itself.
func (f *consistencyFixture) paging(t *testing.T) {
	lists := []struct {
		path, key, id string
		min           int // entries the fixture holds at least
	}{
		{"/api/v1/switches?", "switches", "name", 7},
		{shop + "/switches?", "switches", "name", 6},
		{shop + "/limits?", "limits", "resource", 3},
		{shop + "/rollouts?", "rollouts", "id", 3},
		{shop + "/rollouts?switch=ra&", "rollouts", "id", 1},
		{shop + "/triggers?", "triggers", "name", 3},
		{shop + "/triggers/t-a/evaluations?", "evaluations", "at", 0},
		{shop + "/drills?", "drills", "name", 3},
		{shop + "/drills/d-a/runs?", "runs", "number", 1},
		{"/api/v1/findings?kind=no_owner&", "findings", "id", 7},
		{"/api/v1/channels?", "channels", "name", 3},
		{"/api/v1/deliveries?", "deliveries", "id", 3},
		{"/api/v1/audit?action=switch.create&", "events", "id", 7},
		{"/api/v1/audit/checkpoints?", "checkpoints", "size", 3},
		{"/api/v1/users?", "users", "username", 3},
		{"/api/v1/tokens?", "tokens", "id", 4},
		{"/api/v1/apps/fleet/instances?", "instances", "id", 3},
		{"/api/v1/requests?", "requests", "id", 3},
	}
	for _, l := range lists {
		t.Run(l.key+" "+l.path, func(t *testing.T) {
			whole := f.ids(t, mustStatus(t, call(t, f.c, "GET", l.path+"limit=1000", adminToken, ""), 200), l.key, l.id)
			if len(whole) < l.min {
				t.Fatalf("%d entries, the fixture holds %d: %v", len(whole), l.min, whole)
			}
			var walked []string
			cursor, pages := "", 0
			for {
				r := mustStatus(t, call(t, f.c, "GET", l.path+"limit=2&cursor="+url.QueryEscape(cursor), adminToken, ""), 200)
				page := f.ids(t, r, l.key, l.id)
				pages++
				walked = append(walked, page...)
				_, more := r.Body["next_cursor"]
				cursor = r.str("next_cursor")
				if more && (cursor == "" || len(page) != 2) {
					t.Fatalf("page %d: next_cursor %q after %d entries: %s", pages, cursor, len(page), r.Raw)
				}
				if !more {
					break
				}
			}
			if !slices.Equal(walked, whole) {
				t.Fatalf("pages walked %v, the whole list is %v", walked, whole)
			}
			if want := max(1, (len(whole)+1)/2); pages != want {
				t.Fatalf("%d pages for %d entries", pages, len(whole))
			}
			for _, bad := range []struct{ query, field string }{
				{"limit=0", "limit"}, {"limit=1001", "limit"}, {"limit=ten", "limit"},
				{"cursor=%25%25", "cursor"},
			} {
				mustProblem(t, call(t, f.c, "GET", l.path+bad.query, adminToken, ""), 400, bad.field)
			}
		})
	}
}

// ids returns the id member of every entry of the list under key.
func (f *consistencyFixture) ids(t *testing.T, r response, key, id string) []string {
	t.Helper()
	var body map[string]json.RawMessage
	var entries []map[string]any
	if err := json.Unmarshal([]byte(r.Raw), &body); err != nil || json.Unmarshal(body[key], &entries) != nil {
		t.Fatalf("no list %q: %s", key, r.Raw)
	}
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		out = append(out, fmt.Sprint(e[id]))
	}
	return out
}

// version: every state-changing action takes the version the caller read;
// a stale one is the one conflict problem naming "version", and nothing
// is written.
func (f *consistencyFixture) version(t *testing.T) {
	mustStatus(t, call(t, f.c, "POST", shop+"/switches/c/on", adminToken, `{"reason":"for renew"}`), 200)
	findingA := f.findingOf(t, "switch/shop/a")
	stale := `"version":99,"reason":"stale"`
	actions := []struct{ name, method, path, body string }{
		{"switch patch", "PATCH", shop + "/switches/a", `{"owner":"x",` + stale + `}`},
		{"switch on", "POST", shop + "/switches/a/on", `{` + stale + `}`},
		{"switch off", "POST", shop + "/switches/c/off", `{` + stale + `}`},
		{"switch renew", "POST", shop + "/switches/c/renew", `{` + stale + `}`},
		{"switch delete", "DELETE", shop + "/switches/a", `{` + stale + `}`},
		{"limit patch", "PATCH", shop + "/limits/GET%20%2Fa", `{"max":5,` + stale + `}`},
		{"limit on", "POST", shop + "/limits/GET%20%2Fa/on", `{` + stale + `}`},
		{"limit off", "POST", shop + "/limits/GET%20%2Fa/off", `{` + stale + `}`},
		{"limit delete", "DELETE", shop + "/limits/GET%20%2Fa", `{` + stale + `}`},
		{"rollout pause", "POST", shop + "/rollouts/1/pause", `{` + stale + `}`},
		{"rollout resume", "POST", shop + "/rollouts/1/resume", `{` + stale + `}`},
		{"rollout advance", "POST", shop + "/rollouts/1/advance", `{` + stale + `}`},
		{"rollout abort", "POST", shop + "/rollouts/1/abort", `{` + stale + `}`},
		{"trigger patch", "PATCH", shop + "/triggers/t-a", `{"cooldown":"2m",` + stale + `}`},
		{"trigger pause", "POST", shop + "/triggers/t-a/pause", `{` + stale + `}`},
		{"trigger resume", "POST", shop + "/triggers/t-a/resume", `{` + stale + `}`},
		{"trigger confirm", "POST", shop + "/triggers/t-a/confirm", `{` + stale + `}`},
		{"trigger delete", "DELETE", shop + "/triggers/t-a", `{` + stale + `}`},
		{"drill patch", "PATCH", shop + "/drills/d-b", `{"duration":"2m",` + stale + `}`},
		{"drill run", "POST", shop + "/drills/d-b/runs", `{` + stale + `}`},
		{"drill run abort", "POST", shop + "/drills/d-a/runs/1/abort", `{` + stale + `}`},
		{"drill delete", "DELETE", shop + "/drills/d-b", `{` + stale + `}`},
		{"channel patch", "PATCH", "/api/v1/channels/ch-b", `{"format":"slack",` + stale + `}`},
		{"channel test", "POST", "/api/v1/channels/ch-b/test", `{` + stale + `}`},
		{"channel delete", "DELETE", "/api/v1/channels/ch-b", `{` + stale + `}`},
		{"finding ack", "POST", "/api/v1/findings/" + findingA + "/ack", `{` + stale + `}`},
	}
	before := f.e.snapshot(t, f.c.DB)
	for _, a := range actions {
		t.Run(a.name, func(t *testing.T) {
			r := mustProblem(t, call(t, f.c, a.method, a.path, adminToken, a.body), 409, "version")
			if r.str("type") != api.ConflictType {
				t.Fatalf("type %q: %s", r.str("type"), r.Raw)
			}
		})
	}
	// Users and tokens have no version: a change naming one is refused for it.
	mustProblem(t, call(t, f.c, "PATCH", "/api/v1/users/u-a", adminToken, `{"role":"admin",`+stale+`}`), 400, "version")
	tok := f.ids(t, call(t, f.c, "GET", "/api/v1/tokens?limit=1", adminToken, ""), "tokens", "id")[0]
	mustProblem(t, call(t, f.c, "DELETE", "/api/v1/tokens/"+tok, adminToken, `{`+stale+`}`), 400, "version")
	if after := f.e.snapshot(t, f.c.DB); after != before {
		t.Fatalf("a stale version changed something: %+v -> %+v", before, after)
	}
	// The same actions without a version are not refused for it.
	mustStatus(t, call(t, f.c, "POST", shop+"/triggers/t-b/pause", adminToken, `{"reason":"r"}`), 200)
	v := call(t, f.c, "GET", shop+"/triggers/t-b", adminToken, "").num("trigger", "version")
	mustStatus(t, call(t, f.c, "POST", shop+"/triggers/t-b/resume", adminToken, fmt.Sprintf(`{"version":%d,"reason":"r"}`, int(v))), 200)
}

// findingOf returns the id of the open no_owner finding of target.
func (f *consistencyFixture) findingOf(t *testing.T, target string) string {
	t.Helper()
	r := mustStatus(t, call(t, f.c, "GET", "/api/v1/findings?kind=no_owner&target="+target, adminToken, ""), 200)
	ids := f.ids(t, r, "findings", "id")
	if len(ids) != 1 {
		t.Fatalf("no_owner findings of %s: %s", target, r.Raw)
	}
	return ids[0]
}

// conflict: an action the entity's state does not allow is the same
// problem as a stale version, naming the state instead of a field.
func (f *consistencyFixture) conflict(t *testing.T) {
	cases := []struct{ name, method, path, body, detail string }{
		{"resume a rule that is not paused", "POST", shop + "/triggers/t-b/resume", `{"reason":"r"}`, "neither paused nor locked"},
		{"confirm a rule proposing nothing", "POST", shop + "/triggers/t-b/confirm", `{"reason":"r"}`, "proposes no recovery"},
		{"resume a plan that is not paused", "POST", shop + "/rollouts/2/resume", `{"reason":"r"}`, "only a paused plan resumes"},
		{"abort a drill run that ended", "POST", shop + "/drills/d-a/runs/1/abort", `{"reason":"r"}`, "run #1"},
		{"acknowledge a finding twice", "POST", "/api/v1/findings/" + f.findingOf(t, "switch/shop/c") + "/ack", `{"reason":"r"}`, "acknowledged already, by token:bootstrap#1"},
	}
	r := mustStatus(t, call(t, f.c, "POST", "/api/v1/findings/"+f.findingOf(t, "switch/shop/c")+"/ack", adminToken, `{"version":1,"reason":"seen"}`), 200)
	if r.str("finding", "acked_by") != "token:bootstrap#1" || r.num("finding", "version") != 2 {
		t.Fatalf("acknowledged: %s", r.Raw)
	}
	// The seeded dry run ends: refused by its preflight, or aborted here.
	if r := call(t, f.c, "POST", shop+"/drills/d-a/runs/1/abort", adminToken, `{"reason":"r"}`); r.Status != 200 && r.Status != 409 {
		t.Fatalf("abort the dry run: %s", r.Raw)
	}
	servertest.Eventually(t, 30*time.Second, "the dry run ends", func() bool {
		return call(t, f.c, "GET", shop+"/drills/d-a/runs/1", adminToken, "").str("run", "finished_at") != ""
	})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := mustProblem(t, call(t, f.c, tc.method, tc.path, adminToken, tc.body), 409, "")
			if r.str("type") != api.ConflictType || r.str("field") != "" || !strings.Contains(r.str("detail"), tc.detail) {
				t.Fatalf("want a %s without a field, detail naming %q: %s", api.ConflictType, tc.detail, r.Raw)
			}
		})
	}
}

// mergePatch: every PATCH is an RFC 7396 merge patch, sent as
// application/merge-patch+json or application/json: objects merge member
// by member, null puts an optional field back to its default.
func (f *consistencyFixture) mergePatch(t *testing.T) {
	cases := []struct {
		name, path, key string
		set, unset      string   // merge patches
		field           []string // the field set and unset, under key
		value, def      string   // its value once set and once unset
	}{
		{"switch owner", shop + "/switches/b", "switch", `{"owner":"team-b"}`, `{"owner":null}`, []string{"owner"}, "team-b", ""},
		{"switch max_on", shop + "/switches/b", "switch", `{"max_on":"5h"}`, `{"max_on":null}`, []string{"max_on"}, "5h", "72h"},
		{"switch rollout member", shop + "/switches/b", "switch", `{"rollout":{"selector":"zone=a"}}`, `{"rollout":{"selector":null}}`, []string{"rollout", "selector"}, "zone=a", ""},
		{"limit description", shop + "/limits/GET%20%2Fb", "limit", `{"description":"ledger"}`, `{"description":null}`, []string{"description"}, "ledger", ""},
		{"trigger cooldown", shop + "/triggers/t-b", "trigger", `{"cooldown":"5m"}`, `{"cooldown":null}`, []string{"cooldown"}, "5m", "1m"},
		{"trigger threshold member", shop + "/triggers/t-b", "trigger", `{"trigger":{"threshold":0.7}}`, `{"trigger":{"threshold":0.5}}`, []string{"trigger", "op"}, ">", ">"},
		{"drill recover_within", shop + "/drills/d-c", "drill", `{"recover_within":"45s"}`, `{"recover_within":null}`, []string{"recover_within"}, "45s", ""},
		{"channel apps", "/api/v1/channels/ch-c", "channel", `{"apps":["shop"]}`, `{"apps":null}`, []string{"apps"}, `["shop"]`, "[]"},
		{"user apps", "/api/v1/users/u-b", "user", `{"role":"operator","apps":["shop"]}`, `{"role":"viewer","apps":null}`, []string{"apps"}, `["shop"]`, ""},
		{"user disabled", "/api/v1/users/u-c", "user", `{"disabled":true}`, `{"disabled":null}`, []string{"disabled"}, "true", "false"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for i, step := range []struct{ patch, ctype, want string }{
				{tc.set, api.MergePatchContentType, tc.value},
				{tc.unset, "application/json", tc.def},
			} {
				body := strings.TrimSuffix(step.patch, "}") + `,"reason":"merge"}`
				r := mustStatus(t, call(t, f.c, "PATCH", tc.path, adminToken, body, "Content-Type", step.ctype), 200)
				if got := r.str(append([]string{tc.key}, tc.field...)...); got != step.want {
					t.Fatalf("step %d (%s): %v is %q, want %q: %s", i, step.patch, tc.field, got, step.want, r.Raw)
				}
			}
		})
	}
	// The merged result is validated as a whole: every bad field at once.
	r := mustProblem(t, call(t, f.c, "PATCH", shop+"/switches/b", adminToken, `{"level":"L1","max_on":"never","reason":"r"}`,
		"Content-Type", api.MergePatchContentType), 400, "")
	if s := r.Raw; !strings.Contains(s, `"fallback"`) || !strings.Contains(s, `"max_on"`) {
		t.Fatalf("want fallback (required for L1) and max_on named: %s", s)
	}
	r = mustProblem(t, call(t, f.c, "PATCH", "/api/v1/users/u-b", adminToken, `{"role":"operator","disabled":"yes","username":"x","reason":"r"}`,
		"Content-Type", api.MergePatchContentType), 400, "")
	if s := r.Raw; !strings.Contains(s, `"apps"`) || !strings.Contains(s, `"disabled"`) || !strings.Contains(s, `"username"`) {
		t.Fatalf("want apps (required for an operator), disabled and username named: %s", s)
	}
	// A merge patch is a PATCH's body only.
	mustProblem(t, call(t, f.c, "POST", shop+"/switches/b/on", adminToken, `{"reason":"r"}`, "Content-Type", api.MergePatchContentType), 415, "Content-Type")
}

// findingCounts: the open counts of the findings list follow its filters.
func (f *consistencyFixture) findingCounts(t *testing.T) {
	total := func(r response) (n int) {
		for _, v := range r.Body["open"].(map[string]any) {
			n += int(v.(float64))
		}
		return n
	}
	for _, tc := range []struct {
		query string
		want  int
	}{
		{"app=other&kind=no_owner", 1},
		{"app=shop&kind=no_owner", 6},
		{"kind=no_owner&target=switch/shop/a", 1},
		{"kind=no_owner&state=resolved", 7}, // counts are of open findings, whatever the state listed
	} {
		r := mustStatus(t, call(t, f.c, "GET", "/api/v1/findings?"+tc.query, adminToken, ""), 200)
		if got := total(r); got != tc.want {
			t.Fatalf("%s: open counts add up to %d, want %d: %s", tc.query, got, tc.want, r.Raw)
		}
	}
}

// durations: every duration is answered in one form, Go's without zero
// units, whatever form it was written in.
func (f *consistencyFixture) durations(t *testing.T) {
	cases := []struct {
		name, path, body string
		field            []string
		want             string
	}{
		{"switch max_on in days", shop + "/switches", `{"name":"dur","level":"L3","max_on":"7d","reason":"r"}`, []string{"switch", "max_on"}, "168h"},
		{"switch max_staleness", shop + "/switches", `{"name":"dur2","level":"L2","max_staleness":"90m","reason":"r"}`, []string{"switch", "max_staleness"}, "1h30m"},
		{"limit window", shop + "/limits", `{"resource":"dur","kind":"sliding_window","limit":5,"window":"60s","reason":"r"}`, []string{"limit", "window"}, "1m"},
		{"trigger cooldown", shop + "/triggers", `{"name":"dur","switch":"dur","source":"fleet","query":"degraded_share{switch=\"dur\"}","trigger":{"op":">","threshold":0.5,"for":"120s"},"recover":{"op":"<","threshold":0.1},"cooldown":"1d","reason":"r"}`, []string{"trigger", "cooldown"}, "24h"},
		{"trigger for", shop + "/triggers/dur", "", []string{"trigger", "trigger", "for"}, "2m"},
		{"drill duration", shop + "/drills", `{"name":"dur","switch":"dur","target":{"percent":5},"duration":"60s","probes":[{"url":"http://svc/x","timeout":"2000ms"}],"reason":"r"}`, []string{"drill", "duration"}, "1m"},
		{"rollout hold", shop + "/rollouts", `{"switch":"dur","steps":[{"percent":5,"hold":"300s"},{"percent":100}],"reason":"r"}`, nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var r response
			if tc.body == "" {
				r = mustStatus(t, call(t, f.c, "GET", tc.path, adminToken, ""), 200)
			} else {
				r = mustStatus(t, call(t, f.c, "POST", tc.path, adminToken, tc.body), 201)
			}
			if tc.field == nil {
				if !strings.Contains(r.Raw, `"hold":"5m"`) || strings.Contains(r.Raw, `m0s"`) || strings.Contains(r.Raw, `h0m`) {
					t.Fatalf("want every duration without zero units: %s", r.Raw)
				}
				return
			}
			if got := r.str(tc.field...); got != tc.want {
				t.Fatalf("%v is %q, want %q: %s", tc.field, got, tc.want, r.Raw)
			}
		})
	}
}
