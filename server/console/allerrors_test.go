package console_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestEveryBadFieldAtOnce: for every resource, one answer lists the
// unknown members, the members of the wrong type (under their indexed
// path), the values out of range and the references to nothing together,
// and a refused request writes nothing.
func TestEveryBadFieldAtOnce(t *testing.T) {
	e := newEnv(t)
	c := e.start()
	waitLeader(t, c)
	app := "/api/v1/apps/checkout"
	mustStatus(t, call(t, c, "POST", app+"/switches", adminToken, `{"name":"search","level":"L3","reason":"seed"}`), 201)
	mustStatus(t, call(t, c, "POST", app+"/limits", adminToken, `{"resource":"ledger","kind":"concurrency","max":4,"reason":"seed"}`), 201)
	cond := `"trigger":{"op":">","threshold":0.5},"recover":{"op":"<","threshold":0.1}`
	mustStatus(t, call(t, c, "POST", app+"/triggers", adminToken, `{"name":"t1","switch":"search","source":"fleet","query":"degraded_share{switch=\"search\"}",`+cond+`,"reason":"seed"}`), 201)
	mustStatus(t, call(t, c, "POST", app+"/drills", adminToken, `{"name":"d1","switch":"search","target":{"percent":5},"duration":"1m","probes":[{"url":"http://svc/x"}],"reason":"seed"}`), 201)
	mustStatus(t, call(t, c, "POST", "/api/v1/channels", adminToken, `{"name":"ops","url":"https://hooks.example.com/x","secret":"0123456789abcdef","events":["*"],"reason":"seed"}`), 201)

	cases := []struct {
		name, method, path, body string
		fields                   []string
	}{
		{"switch create", "POST", app + "/switches",
			`{"name":"Bad!","level":3,"max_on":"forever","extra":true,"reason":"r"}`,
			[]string{"level", "extra", "name", "max_on"}},
		{"switch patch", "PATCH", app + "/switches/search",
			`{"description":7,"runbook":"javascript:x","colour":"red","reason":"r"}`,
			[]string{"description", "colour", "runbook"}},
		{"limit create", "POST", app + "/limits",
			`{"resource":"r","kind":"token_bucket","rate":"fast","burst":0,"extra":1,"reason":"r"}`,
			[]string{"rate", "extra", "burst"}},
		{"limit patch", "PATCH", app + "/limits/ledger",
			`{"max":"4","mode":"loud","extra":1,"reason":"r"}`,
			[]string{"max", "extra"}},
		{"rollout create", "POST", app + "/rollouts",
			`{"switch":"nope","steps":[{"percent":"5"},{"percent":150,"hold":"forever"}],"extra":1,"reason":"r"}`,
			[]string{"steps[0].percent", "extra", "steps[1].percent", "steps[1].hold", "switch"}},
		{"trigger create", "POST", app + "/triggers",
			`{"name":"t2","switch":"nope","source":"fleet","query":"degraded_share{switch=\"nope\"}","trigger":{"op":"~","threshold":"high"},"cooldown":"forever","extra":true,"reason":"r"}`,
			[]string{"trigger.threshold", "extra", "trigger.op", "cooldown", "switch"}},
		{"trigger patch", "PATCH", app + "/triggers/t1",
			`{"cooldown":"forever","extra":true,"trigger":{"op":">","threshold":"x"},"reason":"r"}`,
			[]string{"extra", "trigger.threshold", "cooldown"}},
		{"trigger preview", "POST", app + "/triggers/preview",
			`{"rule":{"name":"p","switch":"search","source":"fleet","query":"degraded_share{switch=\"search\"}",` + cond + `,"cooldown":5},"range":"1y","extra":1}`,
			[]string{"rule.cooldown", "extra", "range"}},
		{"drill create", "POST", app + "/drills",
			`{"name":"d2","switch":"nope","target":{"percent":"5"},"duration":"2h","probes":[{"url":"http://svc/x","requests":0,"colour":1}],"reason":"r"}`,
			[]string{"target.percent", "probes[0].colour", "duration", "probes[0].requests", "switch"}},
		{"drill patch", "PATCH", app + "/drills/d1",
			`{"duration":"2h","probes":[{"url":"ftp://x","requests":"ten"}],"extra":1,"reason":"r"}`,
			[]string{"probes[0].requests", "extra", "duration", "probes[0].url"}},
		{"channel create", "POST", "/api/v1/channels",
			`{"name":"ops2","url":"ftp://x","secret":7,"events":["*"],"extra":1,"reason":"r"}`,
			[]string{"secret", "extra", "url"}},
		{"channel patch", "PATCH", "/api/v1/channels/ops",
			`{"url":"ftp://x","events":"all","extra":1,"reason":"r"}`,
			[]string{"events", "extra", "url"}},
		{"user create", "POST", "/api/v1/users",
			`{"username":"Bad Name","password":"short","role":1,"extra":1,"reason":"r"}`,
			[]string{"role", "extra", "username"}},
		{"token create", "POST", "/api/v1/tokens",
			`{"name":"Bad Name","role":"viewer","ttl":5,"reason":"r"}`,
			[]string{"ttl", "name"}},
	}
	before := e.snapshot(t, c.DB)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := mustProblem(t, call(t, c, tc.method, tc.path, adminToken, tc.body), 400, "")
			var p struct {
				Errors []struct{ Field string } `json:"errors"`
			}
			_ = json.Unmarshal([]byte(r.Raw), &p)
			var got []string
			for _, e := range p.Errors {
				got = append(got, e.Field)
			}
			for _, f := range tc.fields {
				if !slices.Contains(got, f) {
					t.Errorf("%s not named; errors %v\n%s", f, got, r.Raw)
				}
			}
			for i, f := range got {
				if slices.Contains(got[:i], f) {
					t.Errorf("%s named twice: %v", f, got)
				}
			}
		})
	}
	if after := e.snapshot(t, c.DB); after != before {
		t.Fatalf("a refused request changed something: %+v -> %+v", before, after)
	}
}

// TestDurationsInDays: wherever a duration may run to days, "d" is
// accepted (one parser, server.ParseDuration), and a range too long is
// one error on its field.
func TestDurationsInDays(t *testing.T) {
	e := newEnv(t)
	c := e.start()
	app := "/api/v1/apps/checkout"
	r := mustStatus(t, call(t, c, "POST", app+"/switches", adminToken, `{"name":"search","level":"L3","max_on":"7d","reason":"seed"}`), 201)
	if r.str("switch", "max_on") != "168h" {
		t.Fatalf("max_on: %s", r.Raw)
	}
	r = mustStatus(t, call(t, c, "POST", app+"/switches/search/on", adminToken, `{"reason":"r"}`), 200)
	on, _ := time.Parse(time.RFC3339Nano, r.str("switch", "on_since"))
	exp, _ := time.Parse(time.RFC3339Nano, r.str("switch", "expires_at"))
	if exp.Sub(on) != 7*24*time.Hour {
		t.Fatalf("a 7d max_on expires %v after the switch went on: %s", exp.Sub(on), r.Raw)
	}
	rule := `{"name":"t1","switch":"search","source":"fleet","query":"degraded_share{switch=\"search\"}","trigger":{"op":">","threshold":0.5,"for":"1m"},"recover":{"op":"<","threshold":0.1},"cooldown":"1d","max_on":"1d12h"`
	r = mustStatus(t, call(t, c, "POST", app+"/triggers", adminToken, rule+`,"reason":"r"}`), 201)
	if r.str("trigger", "cooldown") != "24h" || r.str("trigger", "max_on") != "36h" {
		t.Fatalf("trigger durations: %s", r.Raw)
	}
	mustStatus(t, call(t, c, "POST", app+"/triggers/preview", adminToken, `{"rule":`+rule+`},"range":"2d"}`), 200)
	r = mustProblem(t, call(t, c, "POST", app+"/triggers/preview", adminToken, `{"rule":`+rule+`},"range":"30d"}`), 400, "range")
	if n := strings.Count(r.Raw, `"field":"range"`); n != 2 || !strings.Contains(r.Raw, "at most 7d") {
		t.Fatalf("want one error on range (and the problem's field) saying at most 7d: %s", r.Raw)
	}
	r = mustProblem(t, call(t, c, "POST", app+"/triggers/preview", adminToken, `{"rule":`+rule+`},"range":"a week"}`), 400, "range")
	if n := strings.Count(r.Raw, `"field":"range"`); n != 2 {
		t.Fatalf("want one error on range: %s", r.Raw)
	}
	mustStatus(t, call(t, c, "POST", app+"/switches/search/off", adminToken, `{"reason":"r"}`), 200)
	mustStatus(t, call(t, c, "POST", app+"/rollouts", adminToken, `{"switch":"search","steps":[{"percent":5,"hold":"1d"},{"percent":100}],"reason":"r"}`), 201)
}
