package console_test

import (
	"context"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"gorm.io/gorm"

	"github.com/switchyard-io/switchyard/server/console"
	"github.com/switchyard-io/switchyard/server/trigger"
)

// triggerSnapshot counts everything a rejected trigger request must leave
// untouched.
type triggerSnapshot struct {
	triggers, states, evaluations, switches, audit, findings, notifications, outbox int64
	stateRevs                                                                       int64
	etcdKeys                                                                        int64
}

func (e *env) triggerSnapshot(t *testing.T, db *gorm.DB) triggerSnapshot {
	t.Helper()
	resp, err := e.cli.Get(context.Background(), "/switchyard/v1/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	count := func(table string) int64 {
		var n int64
		if err := db.Table(table).Count(&n).Error; err != nil {
			t.Fatal(err)
		}
		return n
	}
	var revs int64
	if err := db.Table("trigger_states").Select("COALESCE(SUM(rev), 0)").Scan(&revs).Error; err != nil {
		t.Fatal(err)
	}
	return triggerSnapshot{count("triggers"), count("trigger_states"), count("trigger_evaluations"), count("switches"), count("audit_events"),
		count("findings"), count("notifications"), count("outbox"), revs, resp.Count}
}

// TestTriggerBadInput: every bad trigger request is refused with a problem
// document naming the field — before anything is saved, so a typo in a
// query is a 400, not a rule that never fires — and no row, state, etcd
// key or audit event changes.
func TestTriggerBadInput(t *testing.T) {
	e := newEnv(t)
	// The job steps once a term starts and then every 10 m: the rules
	// seeded below are not evaluated while the requests run. Nothing
	// listens at the Prometheus address; checking a query does not ask it.
	slow := func(c *console.Config) { c.TriggerInterval = 10 * time.Minute }
	c := e.start(slow, func(c *console.Config) { c.PrometheusURL = "http://127.0.0.1:1" })
	waitLeader(t, c)
	noProm := e.start(slow)
	for _, sw := range []string{"recommend", "reviews"} {
		mustStatus(t, call(t, c, "POST", "/api/v1/apps/checkout/switches", adminToken, `{"name":"`+sw+`","level":"L3","reason":"seed"}`), 201)
	}
	viewerTok := mustStatus(t, call(t, c, "POST", "/api/v1/tokens", adminToken, `{"name":"viewer","role":"viewer","reason":"read only"}`), 201).str("token")
	opTok := mustStatus(t, call(t, c, "POST", "/api/v1/tokens", adminToken, `{"name":"ops","role":"operator","apps":["payments"],"reason":"payments team"}`), 201).str("token")
	good := `"trigger":{"op":">","threshold":80,"for":"30s"},"recover":{"op":"<","threshold":60,"for":"5m"}`
	mustStatus(t, call(t, c, "POST", "/api/v1/apps/checkout/triggers", adminToken, ruleBody("cpu-high", "recommend", "max(cpu)", good)), 201)

	tr := "/api/v1/apps/checkout/triggers"
	rule := func(extra string) string { return ruleBody("new-rule", "reviews", "max(cpu)", extra) }
	fleetRule := func(query string) string {
		return `{"name":"new-rule","switch":"reviews","source":"fleet","query":"` + query + `",` + good + `,"reason":"r"}`
	}
	cases := []struct {
		name          string
		c             *console.Console
		method, path  string
		token, body   string
		status        int
		field         string
		detailPattern string
	}{
		{"unknown switch", c, "POST", tr, adminToken, ruleBody("new-rule", "nope", "max(cpu)", good), 400, "switch", "no switch checkout/nope"},
		{"recover above an upward trigger", c, "POST", tr, adminToken, rule(`"trigger":{"op":">","threshold":80},"recover":{"op":"<","threshold":90}`), 400, "recover.threshold", "below the trigger threshold 80"},
		{"recover equal to the trigger", c, "POST", tr, adminToken, rule(`"trigger":{"op":">=","threshold":80},"recover":{"op":"<","threshold":80}`), 400, "recover.threshold", ""},
		{"recover below a downward trigger", c, "POST", tr, adminToken, rule(`"trigger":{"op":"<","threshold":10},"recover":{"op":">","threshold":5}`), 400, "recover.threshold", "above the trigger threshold 10"},
		{"recover op the same way", c, "POST", tr, adminToken, rule(`"trigger":{"op":">","threshold":80},"recover":{"op":">=","threshold":60}`), 400, "recover.op", "other way"},
		{"for negative", c, "POST", tr, adminToken, rule(`"trigger":{"op":">","threshold":80,"for":"-5s"},"recover":{"op":"<","threshold":60}`), 400, "trigger.for", "negative"},
		{"recover.for not a duration", c, "POST", tr, adminToken, rule(`"trigger":{"op":">","threshold":80},"recover":{"op":"<","threshold":60,"for":"soon"}`), 400, "recover.for", ""},
		{"for beyond 30 days", c, "POST", tr, adminToken, rule(`"trigger":{"op":">","threshold":80,"for":"800h"},"recover":{"op":"<","threshold":60}`), 400, "trigger.for", ""},
		{"cooldown negative", c, "POST", tr, adminToken, rule(good + `,"cooldown":"-1m"`), 400, "cooldown", ""},
		{"max_on not a duration", c, "POST", tr, adminToken, rule(good + `,"max_on":"forever"`), 400, "max_on", ""},
		{"unparsable PromQL", c, "POST", tr, adminToken, ruleBody("new-rule", "reviews", "max(cpu", good), 400, "query", "unclosed"},
		{"PromQL range vector", c, "POST", tr, adminToken, ruleBody("new-rule", "reviews", "cpu[5m]", good), 400, "query", "range vector"},
		{"empty query", c, "POST", tr, adminToken, ruleBody("new-rule", "reviews", "", good), 400, "query", "empty"},
		{"unknown fleet metric", c, "POST", tr, adminToken, fleetRule(`cpu_usage{}`), 400, "query", "unknown fleet metric"},
		{"fleet metric without its label", c, "POST", tr, adminToken, fleetRule(`degraded_rate`), 400, "query", "needs a switch label"},
		{"unknown op", c, "POST", tr, adminToken, rule(`"trigger":{"op":"=>","threshold":80},"recover":{"op":"<","threshold":60}`), 400, "trigger.op", "must be one of"},
		{"unknown recover op", c, "POST", tr, adminToken, rule(`"trigger":{"op":">","threshold":80},"recover":{"op":"!=","threshold":60}`), 400, "recover.op", ""},
		{"unknown source", c, "POST", tr, adminToken, `{"name":"new-rule","switch":"reviews","source":"graphite","query":"x",` + good + `,"reason":"r"}`, 400, "source", ""},
		{"no source", c, "POST", tr, adminToken, `{"name":"new-rule","switch":"reviews","query":"x",` + good + `,"reason":"r"}`, 400, "source", ""},
		{"prometheus not configured", noProm, "POST", tr, adminToken, rule(good), 400, "source", "--prometheus-url"},
		{"threshold missing", c, "POST", tr, adminToken, rule(`"trigger":{"op":">"},"recover":{"op":"<","threshold":60}`), 400, "trigger.threshold", "required"},
		{"threshold as a string", c, "POST", tr, adminToken, rule(`"trigger":{"op":">","threshold":"80"},"recover":{"op":"<","threshold":60}`), 400, "trigger.threshold", ""},
		{"threshold out of range", c, "POST", tr, adminToken, rule(`"trigger":{"op":">","threshold":1e999},"recover":{"op":"<","threshold":60}`), 400, "trigger.threshold", ""},
		{"bad on_no_data", c, "POST", tr, adminToken, rule(good + `,"on_no_data":"zero"`), 400, "on_no_data", ""},
		{"bad mode", c, "POST", tr, adminToken, rule(good + `,"mode":"shadow"`), 400, "mode", ""},
		{"rollout 0", c, "POST", tr, adminToken, rule(good + `,"rollout":{"percent":0}`), 400, "rollout.percent", ""},
		{"rollout 101", c, "POST", tr, adminToken, rule(good + `,"rollout":{"percent":101}`), 400, "rollout.percent", ""},
		{"unknown rollout template", c, "POST", tr, adminToken, rule(good + `,"rollout":{"template":"slowly"}`), 400, "rollout.template", `must be \"default\" or \"canaries\"`},
		{"percent and template", c, "POST", tr, adminToken, rule(good + `,"rollout":{"percent":5,"template":"default"}`), 400, "rollout", "not both"},
		// The base's strict decoder names an unknown nested member without
		// its parent ("selector", not "rollout.selector").
		{"rollout with a selector", c, "POST", tr, adminToken, rule(good + `,"rollout":{"percent":5,"selector":"zone=a"}`), 400, "rollout.selector", "not a known field"},
		{"flap max 0", c, "POST", tr, adminToken, rule(good + `,"flap":{"max_transitions":0,"window":"1h"}`), 400, "flap.max_transitions", ""},
		{"flap window 0", c, "POST", tr, adminToken, rule(good + `,"flap":{"max_transitions":3,"window":"0s"}`), 400, "flap.window", ""},
		{"description with a control character", c, "POST", tr, adminToken, rule(good + `,"description":"a\u001b[2J"`), 400, "description", ""},
		{"bad rule name", c, "POST", tr, adminToken, ruleBody("CPU High!", "reviews", "max(cpu)", good), 400, "name", ""},
		{"duplicate name", c, "POST", tr, adminToken, ruleBody("cpu-high", "reviews", "max(cpu)", good), 409, "name", ""},
		{"a second enforcing rule on a switch", c, "POST", tr, adminToken, ruleBody("cpu-again", "recommend", "max(cpu)", good), 400, "switch", "already has the enforcing rule cpu-high"},
		{"unknown field", c, "POST", tr, adminToken, rule(good + `,"colour":"red"`), 400, "colour", ""},
		{"missing reason", c, "POST", tr, adminToken, `{"name":"new-rule","switch":"reviews","source":"prometheus","query":"max(cpu)",` + good + `}`, 400, "reason", ""},
		{"viewer creates", c, "POST", tr, viewerTok, rule(good), 403, "", ""},
		{"operator without grant", c, "POST", tr, opTok, rule(good), 403, "", ""},
		{"patch the switch", c, "PATCH", tr + "/cpu-high", adminToken, `{"switch":"reviews","reason":"r"}`, 400, "switch", "cannot be changed"},
		{"patch the name", c, "PATCH", tr + "/cpu-high", adminToken, `{"name":"cpu","reason":"r"}`, 400, "name", ""},
		{"patch to the wrong side", c, "PATCH", tr + "/cpu-high", adminToken, `{"recover":{"threshold":85},"reason":"r"}`, 400, "recover.threshold", ""},
		{"patch a bad query", c, "PATCH", tr + "/cpu-high", adminToken, `{"query":"rate(cpu","reason":"r"}`, 400, "query", ""},
		{"patch stale version", c, "PATCH", tr + "/cpu-high", adminToken, `{"version":7,"cooldown":"2m","reason":"r"}`, 409, "version", ""},
		{"patch an unknown rule", c, "PATCH", tr + "/nope", adminToken, `{"cooldown":"2m","reason":"r"}`, 404, "", ""},
		{"patch without reason", c, "PATCH", tr + "/cpu-high", adminToken, `{"cooldown":"2m"}`, 400, "reason", ""},
		{"delete without reason", c, "DELETE", tr + "/cpu-high", adminToken, "", 400, "reason", ""},
		{"delete stale version", c, "DELETE", tr + "/cpu-high?reason=r&version=9", adminToken, "", 409, "version", ""},
		{"pause an unknown rule", c, "POST", tr + "/nope/pause", adminToken, `{"reason":"r"}`, 404, "", ""},
		{"pause without reason", c, "POST", tr + "/cpu-high/pause", adminToken, `{}`, 400, "reason", ""},
		{"viewer pauses", c, "POST", tr + "/cpu-high/pause", viewerTok, `{"reason":"r"}`, 403, "", ""},
		{"resume a running rule", c, "POST", tr + "/cpu-high/resume", adminToken, `{"reason":"r"}`, 409, "", "neither paused nor locked"},
		{"confirm with no proposal", c, "POST", tr + "/cpu-high/confirm", adminToken, `{"reason":"r"}`, 409, "", "proposes no recovery"},
		{"preview a bad query", c, "POST", tr + "/preview", adminToken, `{"rule":{"source":"prometheus","query":"max(cpu",` + good + `}}`, 400, "rule.query", ""},
		{"preview a bad range", c, "POST", tr + "/preview", adminToken, `{"rule":{"source":"prometheus","query":"max(cpu)",` + good + `},"range":"8d"}`, 400, "range", ""},
		{"preview too many points", c, "POST", tr + "/preview", adminToken, `{"rule":{"source":"prometheus","query":"max(cpu)",` + good + `},"range":"6h","step":"1s"}`, 400, "step", ""},
		{"viewer previews", c, "POST", tr + "/preview", viewerTok, `{"rule":{"source":"prometheus","query":"max(cpu)",` + good + `}}`, 403, "", "right to change app"},
		{"operator of another app previews", c, "POST", tr + "/preview", opTok, `{"rule":{"source":"prometheus","query":"max(cpu)",` + good + `}}`, 403, "", "right to change app"},
		{"evaluations bad limit", c, "GET", tr + "/cpu-high/evaluations?limit=0", adminToken, "", 400, "limit", ""},
		{"evaluations of an unknown rule", c, "GET", tr + "/nope/evaluations", adminToken, "", 404, "", ""},
		{"bad app", c, "POST", "/api/v1/apps/Check%20Out/triggers", adminToken, rule(good), 400, "app", ""},
	}
	before := e.triggerSnapshot(t, c.DB)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := mustProblem(t, call(t, tc.c, tc.method, tc.path, tc.token, tc.body), tc.status, tc.field)
			if !strings.Contains(r.Raw, tc.detailPattern) {
				t.Fatalf("the problem does not say %q: %s", tc.detailPattern, r.Raw)
			}
		})
	}
	// Several bad fields are all named.
	r := mustStatus(t, call(t, c, "POST", tr, adminToken, ruleBody("new-rule", "reviews", "max(cpu", `"trigger":{"op":"~","threshold":80,"for":"-1s"},"recover":{"threshold":60},"mode":"x"`)), 400)
	for _, f := range []string{`"query"`, `"trigger.op"`, `"trigger.for"`, `"mode"`} {
		if !strings.Contains(r.str("errors"), `"field":`+f) {
			t.Errorf("errors do not name %s: %s", f, r.str("errors"))
		}
	}
	if after := e.triggerSnapshot(t, c.DB); after != before {
		t.Fatalf("rejected requests changed state:\nbefore %+v\nafter  %+v", before, after)
	}
	t.Logf("%d bad trigger requests refused; rows, states, evaluations, findings, notifications, audit events and etcd keys unchanged", len(cases)+1)
}

// TestTriggerPreviewRateLimit: each actor gets trigger.PreviewBurst
// previews at once; the next is a 429 for that actor only.
func TestTriggerPreviewRateLimit(t *testing.T) {
	e := newEnv(t)
	c := e.start()
	mustStatus(t, call(t, c, "POST", "/api/v1/apps/checkout/switches", adminToken, `{"name":"reviews","level":"L3","reason":"seed"}`), 201)
	opTok := mustStatus(t, call(t, c, "POST", "/api/v1/tokens", adminToken, `{"name":"ops","role":"operator","apps":["checkout"],"reason":"team"}`), 201).str("token")
	body := `{"rule":{"source":"fleet","query":"degraded_rate{switch=\"reviews\"}","trigger":{"op":">","threshold":5,"for":"30s"},"recover":{"op":"<","threshold":1,"for":"30s"}},"range":"10m"}`
	path := "/api/v1/apps/checkout/triggers/preview"
	for i := 0; i < trigger.PreviewBurst; i++ {
		mustStatus(t, call(t, c, "POST", path, opTok, body), 200)
	}
	mustProblem(t, call(t, c, "POST", path, opTok, body), 429, "")
	mustStatus(t, call(t, c, "POST", path, adminToken, body), 200) // another actor's bucket
}
