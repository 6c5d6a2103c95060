package console_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/servertest"
	"github.com/switchyard-io/switchyard/sdk/wire"
)

// TestOverloadLimitKinds: the overload levers are limit rules like the
// others — each bad parameter is refused naming its field with nothing
// written, every bad field of a request is named at once, and a good rule
// is stored, audited and published.
func TestOverloadLimitKinds(t *testing.T) {
	e := newEnv(t)
	c := e.start()
	waitLeader(t, c)
	lim := "/api/v1/apps/checkout/limits"
	mustStatus(t, call(t, c, "POST", lim, adminToken, `{"resource":"ledger","kind":"concurrency","max":4,"reason":"seed"}`), 201)

	cases := []struct{ name, body, field string }{
		// throttle
		{"throttle k below 1", `"kind":"throttle","k":0.5`, "k"},
		{"throttle k above 10", `"kind":"throttle","k":11`, "k"},
		{"throttle k negative", `"kind":"throttle","k":-2`, "k"},
		{"throttle k a string", `"kind":"throttle","k":"two"`, "k"},
		{"throttle window too short", `"kind":"throttle","window":"100ms"`, "window"},
		{"throttle window too long", `"kind":"throttle","window":"1h"`, "window"},
		{"throttle window negative", `"kind":"throttle","window":"-10s"`, "window"},
		{"throttle window not a duration", `"kind":"throttle","window":"soon"`, "window"},
		{"throttle min_requests negative", `"kind":"throttle","min_requests":-1`, "min_requests"},
		{"throttle reserve above 0.45", `"kind":"throttle","reserve":0.5`, "reserve"},
		{"throttle cluster scope", `"kind":"throttle","scope":"cluster"`, "scope"},
		{"throttle with a cpu threshold", `"kind":"throttle","cpu":0.8`, "cpu"},
		{"throttle with max", `"kind":"throttle","max":3`, "max"},
		// system
		{"system cpu above 1", `"kind":"system","cpu":1.5`, "cpu"},
		{"system cpu as percent", `"kind":"system","cpu":80`, "cpu"},
		{"system cpu tiny", `"kind":"system","cpu":0.01`, "cpu"},
		{"system cpu negative", `"kind":"system","cpu":-0.8`, "cpu"},
		{"system cpu a string", `"kind":"system","cpu":"high"`, "cpu"},
		{"system window too short", `"kind":"system","window":"10ms"`, "window"},
		{"system cooldown too long", `"kind":"system","cooldown":"2m"`, "cooldown"},
		{"system cooldown negative", `"kind":"system","cooldown":"-1s"`, "cooldown"},
		{"system key_by", `"kind":"system","key_by":{"source":"header","name":"X-Tenant"}`, "key_by.source"},
		{"system cluster scope", `"kind":"system","scope":"cluster"`, "scope"},
		{"system reserve negative", `"kind":"system","reserve":-0.1`, "reserve"},
		{"system with k", `"kind":"system","k":2`, "k"},
		// CoDel queue, priorities and warm-up on the classic kinds
		{"queue target too long", `"kind":"concurrency","max":4,"queue_target":"30s"`, "queue_target"},
		{"queue target below 1ms", `"kind":"concurrency","max":4,"queue_target":"100us"`, "queue_target"},
		{"queue interval without target", `"kind":"concurrency","max":4,"queue_interval":"100ms"`, "queue_interval"},
		{"queue interval not above target", `"kind":"concurrency","max":4,"queue_target":"50ms","queue_interval":"20ms"`, "queue_interval"},
		{"lifo without a queue", `"kind":"concurrency","max":4,"lifo":true`, "lifo"},
		{"lifo not a bool", `"kind":"concurrency","max":4,"queue_target":"5ms","lifo":"yes"`, "lifo"},
		{"queue on a token bucket", `"kind":"token_bucket","rate":5,"burst":5,"queue_target":"5ms"`, "queue_target"},
		{"reserve on a breaker", `"kind":"breaker","error_rate":0.5,"min_requests":10,"window":"10s","open_duration":"5s","reserve":0.2`, "reserve"},
		{"reserve above 0.45", `"kind":"concurrency","max":4,"reserve":0.9`, "reserve"},
		{"warm_up too long", `"kind":"token_bucket","rate":5,"burst":5,"warm_up":"2h"`, "warm_up"},
		{"warm_up below 1s", `"kind":"token_bucket","rate":5,"burst":5,"warm_up":"10ms"`, "warm_up"},
		{"warm_up on gcra", `"kind":"gcra","rate":5,"warm_up":"10s"`, "warm_up"},
	}
	before := e.snapshot(t, c.DB)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mustProblem(t, call(t, c, "POST", lim, adminToken, `{"resource":"dep",`+tc.body+`,"reason":"r"}`), 400, tc.field)
		})
	}
	// Every bad field of one request, at once, on create and on patch.
	for _, tc := range []struct {
		name, method, path, body string
		fields                   []string
	}{
		{"throttle create", "POST", lim, `{"resource":"dep","kind":"throttle","k":20,"window":"1ms","min_requests":-5,"reserve":2,"reason":"r"}`,
			[]string{"k", "window", "min_requests", "reserve"}},
		{"system create", "POST", lim, `{"resource":"dep","kind":"system","cpu":7,"cooldown":"5m","scope":"cluster","reason":"r"}`,
			[]string{"cpu", "cooldown", "scope"}},
		{"queue patch", "PATCH", lim + "/ledger", `{"max":0,"queue_target":"1m","lifo":true,"reserve":1,"reason":"r"}`,
			[]string{"max", "queue_target", "reserve"}},
	} {
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
				t.Errorf("%s: %s not named; errors %v", tc.name, f, got)
			}
		}
	}
	if after := e.snapshot(t, c.DB); after != before {
		t.Fatalf("a refused request changed something: %+v -> %+v", before, after)
	}

	// Good rules of every lever are stored, audited and published.
	for _, body := range []string{
		`{"resource":"payments-api","kind":"throttle","k":2,"window":"10s","min_requests":20,"reserve":0.2,"reason":"protect payments"}`,
		`{"resource":"POST /render","kind":"system","cpu":0.8,"mode":"shadow","reason":"shed when the host is saturated"}`,
		`{"resource":"POST /export","kind":"concurrency","max":8,"queue_target":"5ms","lifo":true,"reserve":0.2,"warm_up":"30s","reason":"queue by delay"}`,
		`{"resource":"GET /feed","kind":"token_bucket","rate":100,"burst":20,"warm_up":"10s","reason":"ramp after incidents"}`,
	} {
		r := mustStatus(t, call(t, c, "POST", lim, adminToken, body), 201)
		var in struct{ Resource string }
		_ = json.Unmarshal([]byte(body), &in)
		key := wire.LimitKey("default", "checkout", in.Resource)
		servertest.Eventually(t, 10*time.Second, "publish of "+in.Resource, func() bool { return e.etcdValue(key) != "" })
		pub, err := wire.DecodeLimitRule([]byte(e.etcdValue(key)))
		if err != nil {
			t.Fatalf("published %s does not decode: %v", in.Resource, err)
		}
		if pub.Kind != r.str("limit", "kind") {
			t.Fatalf("published kind %q, API %s", pub.Kind, r.Raw)
		}
	}
	audit := mustStatus(t, call(t, c, "GET", "/api/v1/audit?target=limit/checkout/payments-api", adminToken, ""), 200)
	if !strings.Contains(audit.Raw, "protect payments") {
		t.Fatalf("the throttle rule's creation is not audited: %s", audit.Raw)
	}
}
