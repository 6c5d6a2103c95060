package console_test

import (
	"context"
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// withMember returns the JSON object base with the member at path
// ("probes[0].requests", "gate.min_applied") set to the JSON raw, or
// removed when raw is "".
func withMember(t *testing.T, base, path, raw string) string {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal([]byte(base), &doc); err != nil {
		t.Fatal(err)
	}
	var cur any = doc
	parts := strings.Split(path, ".")
	index := regexp.MustCompile(`^(\w+)\[(\d+)\]$`)
	for i, p := range parts {
		obj := cur.(map[string]any)
		last := i == len(parts)-1
		if m := index.FindStringSubmatch(p); m != nil {
			n, _ := strconv.Atoi(m[2])
			cur = obj[m[1]].([]any)[n]
			continue
		}
		switch {
		case last && raw == "":
			delete(obj, p)
		case last:
			var v any
			if err := json.Unmarshal([]byte(raw), &v); err != nil {
				t.Fatal(err)
			}
			obj[p] = v
		default:
			if obj[p] == nil {
				obj[p] = map[string]any{}
			}
			cur = obj[p]
		}
	}
	b, _ := json.Marshal(doc)
	return string(b)
}

// TestJobNumbersExplicit: every numeric member of the job resources —
// rollouts, triggers, drills — given explicitly as 0, negative or out of
// range is refused with a 400 naming the member (by its indexed path); only
// an absent member takes the default. No refused request changes a row,
// an etcd key or the audit log. (Channels have no numeric member.)
func TestJobNumbersExplicit(t *testing.T) {
	e := newEnv(t)
	c := e.start()
	waitLeader(t, c)
	app := "/api/v1/apps/checkout"
	mustStatus(t, call(t, c, "POST", app+"/switches", adminToken, `{"name":"search","level":"L3","reason":"seed"}`), 201)

	rollout := `{"switch":"search","steps":[{"percent":5,"hold":"1m","gate":{"min_applied":1}},{"percent":100}],"gate":{"min_applied":1,"failure_limit":0,"interval":"10s"},"reason":"r"}`
	rule := `{"name":"t","switch":"search","source":"fleet","query":"degraded_share{switch=\"search\"}","trigger":{"op":">","threshold":0.5,"for":"1m"},` +
		`"recover":{"op":"<","threshold":0.1,"for":"1m"},"cooldown":"1m","max_on":"1h","flap":{"max_transitions":4,"window":"1h"},"rollout":{"percent":50},"reason":"r"}`
	drill := `{"name":"d","switch":"search","target":{"percent":5},"duration":"1m","effect_within":"5s","recover_within":"30s","starting_deadline":"10m",` +
		`"probes":[{"url":"http://svc/x","expect_status":200,"requests":10,"max_p99":"20ms","timeout":"2s"}],` +
		`"abort":{"probe_failure_rate":0.5,"conditions":[{"source":"fleet","query":"degraded_share{switch=\"search\"}","op":">","threshold":0.9}]},` +
		`"preflight":{"trigger_window":"1h"},"reason":"r"}`
	cases := []struct {
		resource, base, path string
		values               []string
	}{
		{"rollouts", rollout, "steps[0].percent", []string{"-1", "100.5", "150"}},
		{"rollouts", rollout, "steps[0].hold", []string{`"-1s"`}},
		{"rollouts", rollout, "steps[0].gate.min_applied", []string{"0", "-0.5", "1.5"}},
		{"rollouts", rollout, "gate.min_applied", []string{"0", "-1", "2"}},
		{"rollouts", rollout, "gate.failure_limit", []string{"-1", "1001"}},
		{"rollouts", rollout, "gate.interval", []string{`"0s"`, `"-1s"`, `"2h"`}},
		{"triggers", rule, "trigger.for", []string{`"-1s"`}},
		{"triggers", rule, "recover.for", []string{`"-1s"`}},
		{"triggers", rule, "cooldown", []string{`"-1s"`}},
		{"triggers", rule, "max_on", []string{`"-1m"`}},
		{"triggers", rule, "flap.max_transitions", []string{"0", "-1", "1000000"}},
		{"triggers", rule, "flap.window", []string{`"0s"`, `"-1h"`}},
		{"triggers", rule, "rollout.percent", []string{"0", "-1", "101"}},
		{"drills", drill, "target.percent", []string{"0", "-5", "101"}},
		{"drills", drill, "duration", []string{`"0s"`, `"-1m"`, `"2h"`}},
		{"drills", drill, "effect_within", []string{`"0s"`, `"-1s"`, `"2m"`}},
		{"drills", drill, "recover_within", []string{`"0s"`, `"-1s"`, `"1h"`}},
		{"drills", drill, "starting_deadline", []string{`"0s"`, `"-1s"`}},
		{"drills", drill, "probes[0].expect_status", []string{"0", "99", "600"}},
		{"drills", drill, "probes[0].requests", []string{"0", "-1", "201"}},
		{"drills", drill, "probes[0].max_p99", []string{`"0s"`, `"-1ms"`, `"1m"`}},
		{"drills", drill, "probes[0].timeout", []string{`"0s"`, `"-1s"`}},
		{"drills", drill, "abort.probe_failure_rate", []string{"-0.1", "1.5"}},
		{"drills", drill, "abort.conditions[0].threshold", []string{""}}, // required: absent has no default
		{"drills", drill, "preflight.trigger_window", []string{`"-1m"`, `"48h"`}},
	}
	snap := func() [5]int64 {
		t.Helper()
		keys, err := e.cli.Get(context.Background(), "/switchyard/v1/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			t.Fatal(err)
		}
		var s [5]int64
		for i, table := range []string{"rollouts", "triggers", "drills", "audit_events"} {
			if err := c.DB.Table(table).Count(&s[i]).Error; err != nil {
				t.Fatal(err)
			}
		}
		s[4] = keys.Count
		return s
	}
	before := snap()
	refused := 0
	for _, tc := range cases {
		for _, v := range tc.values {
			body := withMember(t, tc.base, tc.path, v)
			r := mustStatus(t, call(t, c, "POST", app+"/"+tc.resource, adminToken, body), 400)
			if !strings.Contains(r.str("errors"), `"field":"`+tc.path+`"`) {
				t.Errorf("%s %s=%s: the errors do not name it: %s", tc.resource, tc.path, v, r.Raw)
			}
			refused++
		}
	}
	if after := snap(); after != before {
		t.Fatalf("refused requests changed something (rollouts, triggers, drills, audit events, etcd keys): %v -> %v", before, after)
	}
	t.Logf("%d explicit out-of-range numbers refused, naming the member; nothing written", refused)

	// The bases are good, and an absent member takes its default.
	mustStatus(t, call(t, c, "POST", app+"/drills", adminToken, drill), 201)
	r := mustStatus(t, call(t, c, "POST", app+"/triggers", adminToken, withMember(t, rule, "flap.max_transitions", "")), 201)
	if r.num("trigger", "flap", "max_transitions") != 4 {
		t.Fatalf("a flap without max_transitions: want the default 4: %s", r.Raw)
	}
	mustProblem(t, call(t, c, "PATCH", app+"/triggers/t", adminToken, `{"flap":{"max_transitions":0},"reason":"r"}`), 400, "flap.max_transitions")
	mustProblem(t, call(t, c, "PATCH", app+"/drills/d", adminToken, `{"probes":[{"url":"http://svc/x","requests":0}],"reason":"r"}`), 400, "probes[0].requests")
	mustStatus(t, call(t, c, "POST", app+"/rollouts", adminToken, rollout), 201)
}
