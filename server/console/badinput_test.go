package console_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
	"gorm.io/gorm"

	"github.com/switchyard-io/switchyard/sdk/wire"
)

// snapshot counts everything a rejected request must leave untouched.
type snapshot struct {
	switches, limits, audit, tokens, users, outbox int64
	etcdKeys, etcdLimits                           int64
}

func (e *env) snapshot(t *testing.T, db *gorm.DB) snapshot {
	t.Helper()
	resp, err := e.cli.Get(context.Background(), wire.KindPrefix("default", wire.KindSwitches), clientv3.WithPrefix(), clientv3.WithCountOnly())
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
	lims, err := e.cli.Get(context.Background(), wire.KindPrefix("default", wire.KindLimits), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return snapshot{count("switches"), count("limit_rules"), count("audit_events"), count("api_tokens"), count("users"), count("outbox"), resp.Count, lims.Count}
}

// keysJSON is n distinct keys as JSON array members.
func keysJSON(n int) string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf(`"t%d"`, i)
	}
	return strings.Join(keys, ",")
}

// TestBadInput sends requests that must each be refused with the right
// status and a problem document naming the field, and checks that no row,
// etcd key or audit event changed.
func TestBadInput(t *testing.T) {
	e := newEnv(t)
	c := e.start()
	waitLeader(t, c)
	sw := "/api/v1/apps/checkout/switches"
	mustStatus(t, call(t, c, "POST", sw, adminToken, `{"name":"search","level":"L3","reason":"seed"}`), 201)
	mustStatus(t, call(t, c, "POST", "/api/v1/apps/checkout/limits", adminToken, `{"resource":"GET /search","kind":"concurrency","max":4,"reason":"seed"}`), 201)
	viewerTok := mustStatus(t, call(t, c, "POST", "/api/v1/tokens", adminToken, `{"name":"viewer","role":"viewer","reason":"read only"}`), 201).str("token")
	opTok := mustStatus(t, call(t, c, "POST", "/api/v1/tokens", adminToken, `{"name":"ops","role":"operator","apps":["payments"],"reason":"payments team"}`), 201).str("token")
	mustStatus(t, call(t, c, "POST", "/api/v1/users", adminToken, `{"username":"olga","password":"olga-password-1","role":"viewer","reason":"seed"}`), 201)
	lim := "/api/v1/apps/checkout/limits"
	users := "/api/v1/users"

	bigFallback := `{"name":"big","level":"L1","reason":"r","fallback":"` + strings.Repeat("x", 65*1024) + `"}`
	hugeBody := `{"name":"huge","level":"L3","reason":"` + strings.Repeat("x", 1<<20) + `"}`
	cases := []struct {
		name, method, path, token, body string
		status                          int
		field                           string
		hdr                             []string
	}{
		{"unknown level", "POST", sw, adminToken, `{"name":"a","level":"L7","reason":"r"}`, 400, "level", nil},
		{"level as number", "POST", sw, adminToken, `{"name":"a","level":3,"reason":"r"}`, 400, "level", nil},
		{"rollout 101", "POST", sw + "/search/on", adminToken, `{"reason":"r","rollout":{"percent":101}}`, 400, "rollout.percent", nil},
		{"rollout -1", "POST", sw + "/search/on", adminToken, `{"reason":"r","rollout":{"percent":-1}}`, 400, "rollout.percent", nil},
		{"rollout 3 decimals", "POST", sw + "/search/on", adminToken, `{"reason":"r","rollout":{"percent":33.333}}`, 400, "rollout.percent", nil},
		{"bad stickiness", "POST", sw + "/search/on", adminToken, `{"reason":"r","rollout":{"percent":5,"stickiness":"user"}}`, 400, "rollout.stickiness", nil},
		{"bad selector", "POST", sw + "/search/on", adminToken, `{"reason":"r","rollout":{"percent":5,"selector":"zone=a,,"}}`, 400, "rollout.selector", nil},
		{"required field not a JSON pointer", "POST", sw, adminToken, `{"name":"a","level":"L1","fallback":[],"verify":{"required_fields":["/items","items/0/sku"]},"reason":"r"}`, 400, "verify.required_fields[1]", nil},
		{"verify schema that does not compile", "POST", sw, adminToken, `{"name":"a","level":"L1","fallback":[],"verify":{"schema":{"type":"nope"}},"reason":"r"}`, 400, "verify.schema", nil},
		{"verify schema with a bad regex, by patch", "PATCH", sw + "/search", adminToken, `{"level":"L1","fallback":[],"verify":{"schema":{"properties":{"sku":{"pattern":"("}}}},"reason":"r"}`, 400, "verify.schema", nil},
		{"verify schema $ref to a URL", "POST", sw, adminToken, `{"name":"a","level":"L1","fallback":[],"verify":{"schema":{"$ref":"https://schemas.example/page.json"}},"reason":"r"}`, 400, "verify.schema", nil},
		{"verify schema $ref to a file", "POST", sw, adminToken, `{"name":"a","level":"L1","fallback":[],"verify":{"schema":{"$ref":"file:///etc/passwd"}},"reason":"r"}`, 400, "verify.schema", nil},
		{"verify schema not an object", "POST", sw, adminToken, `{"name":"a","level":"L1","fallback":[],"verify":{"schema":["type"]},"reason":"r"}`, 400, "verify.schema", nil},
		{"verify schema too large", "POST", sw, adminToken, `{"name":"a","level":"L1","fallback":[],"verify":{"schema":{"description":"` + strings.Repeat("x", wire.MaxVerifySchema) + `"}},"reason":"r"}`, 400, "verify.schema", nil},
		{"verify every below 1s", "POST", sw, adminToken, `{"name":"a","level":"L1","fallback":[],"verify":{"every":"100ms"},"reason":"r"}`, 400, "verify.every", nil},
		{"verify of an L3 switch", "PATCH", sw + "/search", adminToken, `{"verify":{},"reason":"r"}`, 400, "verify", nil},
		{"key list over the limit", "POST", sw + "/search/on", adminToken, `{"reason":"r","rollout":{"percent":5,"include":[` + keysJSON(wire.MaxListKeys+1) + `]}}`, 400, "rollout.include", nil},
		{"same key in include and exclude", "POST", sw + "/search/on", adminToken, `{"reason":"r","rollout":{"percent":5,"include":["t1","t2"],"exclude":["t3","t2"]}}`, 400, "rollout.exclude[1]", nil},
		{"empty key", "POST", sw + "/search/on", adminToken, `{"reason":"r","rollout":{"percent":5,"exclude":[""]}}`, 400, "rollout.exclude[0]", nil},
		{"fallback not JSON", "POST", sw, adminToken, `{"name":"a","level":"L1","reason":"r","fallback":{oops}}`, 400, "body", nil},
		{"fallback on L3", "POST", sw, adminToken, `{"name":"a","level":"L3","reason":"r","fallback":[]}`, 400, "fallback", nil},
		{"fallback over 64 KiB", "POST", sw, adminToken, bigFallback, 400, "fallback", nil},
		{"L2 without max_staleness", "POST", sw, adminToken, `{"name":"a","level":"L2","reason":"r"}`, 400, "max_staleness", nil},
		{"warm_up 0", "POST", sw, adminToken, `{"name":"a","level":"L4","warm_up":"0","reason":"r"}`, 400, "warm_up", nil},
		{"warm_up 0s", "POST", sw, adminToken, `{"name":"a","level":"L4","warm_up":"0s","reason":"r"}`, 400, "warm_up", nil},
		{"negative warm_up", "POST", sw, adminToken, `{"name":"a","level":"L4","warm_up":"-30s","reason":"r"}`, 400, "warm_up", nil},
		{"warm_up under 1s", "POST", sw, adminToken, `{"name":"a","level":"L4","warm_up":"500ms","reason":"r"}`, 400, "warm_up", nil},
		{"warm_up over 10m", "POST", sw, adminToken, `{"name":"a","level":"L4","warm_up":"11m","reason":"r"}`, 400, "warm_up", nil},
		{"warm_up not a duration", "POST", sw, adminToken, `{"name":"a","level":"L4","warm_up":"soon","reason":"r"}`, 400, "warm_up", nil},
		{"warm_up as number", "POST", sw, adminToken, `{"name":"a","level":"L4","warm_up":30,"reason":"r"}`, 400, "warm_up", nil},
		{"warm_up on L5", "POST", sw, adminToken, `{"name":"a","level":"L5","warm_up":"30s","reason":"r"}`, 400, "warm_up", nil},
		{"warm_up on L3", "PATCH", sw + "/search", adminToken, `{"warm_up":"30s","reason":"r"}`, 400, "warm_up", nil},
		{"bad max_on", "POST", sw, adminToken, `{"name":"a","level":"L3","reason":"r","max_on":"forever"}`, 400, "max_on", nil},
		{"bad expiry policy", "POST", sw, adminToken, `{"name":"a","level":"L3","reason":"r","expiry_policy":"never"}`, 400, "expiry_policy", nil},
		{"bad runbook", "POST", sw, adminToken, `{"name":"a","level":"L3","reason":"r","runbook":"javascript:alert(1)"}`, 400, "runbook", nil},
		{"body over 1 MiB", "POST", sw, adminToken, hugeBody, 413, "body", nil},
		{"bad switch name", "POST", sw, adminToken, `{"name":"Bad_Name!","level":"L3","reason":"r"}`, 400, "name", nil},
		{"bad app name", "POST", "/api/v1/apps/Check%20Out/switches", adminToken, `{"name":"a","level":"L3","reason":"r"}`, 400, "app", nil},
		{"missing reason", "POST", sw + "/search/on", adminToken, `{}`, 400, "reason", nil},
		{"blank reason", "POST", sw + "/search/off", adminToken, `{"reason":"   "}`, 400, "reason", nil},
		{"missing reason on delete", "DELETE", sw + "/search", adminToken, "", 400, "reason", nil},
		{"stale version", "POST", sw + "/search/on", adminToken, `{"reason":"r","version":9}`, 409, "version", nil},
		{"stale version on delete", "DELETE", sw + "/search?reason=r&version=9", adminToken, "", 409, "version", nil},
		{"duplicate switch", "POST", sw, adminToken, `{"name":"search","level":"L3","reason":"r"}`, 409, "name", nil},
		{"unknown field", "POST", sw, adminToken, `{"name":"a","level":"L3","reason":"r","colour":"red"}`, 400, "colour", nil},
		{"unknown field in patch", "PATCH", sw + "/search", adminToken, `{"reason":"r","state":"on"}`, 400, "state", nil},
		{"rollout on off", "POST", sw + "/search/off", adminToken, `{"reason":"r","rollout":{"percent":5}}`, 400, "rollout", nil},
		{"two JSON documents", "POST", sw, adminToken, `{"name":"a","level":"L3","reason":"r"}{}`, 400, "body", nil},
		{"empty body", "POST", sw, adminToken, ` `, 400, "body", nil},
		{"wrong content type", "POST", sw, adminToken, `{"name":"a","level":"L3","reason":"r"}`, 415, "Content-Type", []string{"Content-Type", "text/plain"}},
		{"no token", "POST", sw, "", `{"name":"a","level":"L3","reason":"r"}`, 401, "Authorization", nil},
		{"bad token", "GET", sw, "sy_nope", "", 401, "Authorization", nil},
		{"viewer writes", "POST", sw + "/search/on", viewerTok, `{"reason":"r"}`, 403, "", nil},
		{"operator without grant", "POST", sw + "/search/on", opTok, `{"reason":"r"}`, 403, "", nil},
		{"operator mints token", "POST", "/api/v1/tokens", opTok, `{"name":"x","role":"admin","reason":"r"}`, 403, "", nil},
		{"token bad role", "POST", "/api/v1/tokens", adminToken, `{"name":"x","role":"root","reason":"r"}`, 400, "role", nil},
		{"unknown switch", "POST", sw + "/nope/on", adminToken, `{"reason":"r"}`, 404, "", nil},
		{"duplicate limit", "POST", "/api/v1/apps/checkout/limits", adminToken, `{"resource":"GET /search","kind":"concurrency","max":4,"reason":"r"}`, 409, "resource", nil},
		{"limit unknown kind", "POST", "/api/v1/apps/checkout/limits", adminToken, `{"resource":"GET /","kind":"leaky","reason":"r"}`, 400, "kind", nil},
		{"limit missing burst", "POST", "/api/v1/apps/checkout/limits", adminToken, `{"resource":"GET /","kind":"token_bucket","rate":5,"reason":"r"}`, 400, "burst", nil},
		{"limit bad mode", "POST", "/api/v1/apps/checkout/limits", adminToken, `{"resource":"GET /","kind":"concurrency","max":3,"mode":"dry","reason":"r"}`, 400, "mode", nil},
		{"limit bad duration", "POST", "/api/v1/apps/checkout/limits", adminToken, `{"resource":"GET /","kind":"sliding_window","limit":3,"window":"soon","reason":"r"}`, 400, "window", nil},
		{"breaker rate above 1", "POST", "/api/v1/apps/checkout/limits", adminToken, `{"resource":"dep","kind":"breaker","error_rate":1.5,"min_requests":10,"window":"10s","open_duration":"5s","half_open_probes":1,"reason":"r"}`, 400, "error_rate", nil},
		{"limit patch resource", "PATCH", "/api/v1/apps/checkout/limits/GET%20%2Fsearch", adminToken, `{"reason":"r","resource":"x"}`, 400, "resource", nil},
		{"audit bad since", "GET", "/api/v1/audit?since=yesterday", adminToken, "", 400, "since", nil},
		{"L1 with null fallback", "POST", sw, adminToken, `{"name":"a","level":"L1","reason":"r","fallback":null}`, 400, "fallback", nil},
		{"resource with an ANSI escape", "POST", lim, adminToken, `{"resource":"GET /a\u001b[2Jb","kind":"concurrency","max":3,"reason":"r"}`, 400, "resource", nil},
		{"reason with an ANSI escape", "POST", sw + "/search/on", adminToken, `{"reason":"ok\u001b[2J"}`, 400, "reason", nil},
		{"reason with a newline", "POST", sw + "/search/on", adminToken, `{"reason":"ok\nforged line"}`, 400, "reason", nil},
		{"description with a control character", "POST", sw, adminToken, `{"name":"a","level":"L3","description":"x\u0007","reason":"r"}`, 400, "description", nil},
		{"owner with a control character", "PATCH", sw + "/search", adminToken, `{"owner":"\u001b]0;pwned\u0007","reason":"r"}`, 400, "owner", nil},
		{"limit rate of the wrong type", "POST", lim, adminToken, `{"resource":"GET /t","kind":"token_bucket","rate":"fast","burst":1,"reason":"r"}`, 400, "rate", nil},
		{"breaker negative error rate", "POST", lim, adminToken, `{"resource":"dep","kind":"breaker","error_rate":-0.1,"min_requests":10,"window":"10s","open_duration":"5s","reason":"r"}`, 400, "error_rate", nil},
		{"limit parameter of another kind", "POST", lim, adminToken, `{"resource":"GET /t","kind":"token_bucket","rate":5,"burst":5,"max":3,"reason":"r"}`, 400, "max", nil},
		{"duplicate token name", "POST", "/api/v1/tokens", adminToken, `{"name":"viewer","role":"viewer","reason":"r"}`, 409, "name", nil},
		{"user short password", "POST", users, adminToken, `{"username":"bob","password":"short","role":"viewer","reason":"r"}`, 400, "password", nil},
		{"user bad name", "POST", users, adminToken, `{"username":"Bob Smith","password":"long-enough-1","role":"viewer","reason":"r"}`, 400, "username", nil},
		{"user operator without apps", "POST", users, adminToken, `{"username":"bob","password":"long-enough-1","role":"operator","reason":"r"}`, 400, "apps", nil},
		{"user without reason", "POST", users, adminToken, `{"username":"bob","password":"long-enough-1","role":"viewer"}`, 400, "reason", nil},
		{"duplicate user", "POST", users, adminToken, `{"username":"olga","password":"long-enough-1","role":"viewer","reason":"r"}`, 409, "username", nil},
		{"user unknown field", "PATCH", users + "/olga", adminToken, `{"email":"o@x","reason":"r"}`, 400, "email", nil},
		{"user bad role", "PATCH", users + "/olga", adminToken, `{"role":"root","reason":"r"}`, 400, "role", nil},
		{"unknown user", "PATCH", users + "/nobody", adminToken, `{"disabled":true,"reason":"r"}`, 404, "", nil},
		{"viewer lists users", "GET", users, viewerTok, "", 403, "", nil},
		{"operator creates a user", "POST", users, opTok, `{"username":"bob","password":"long-enough-1","role":"viewer","reason":"r"}`, 403, "", nil},
	}
	before := e.snapshot(t, c.DB)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			mustProblem(t, call(t, c, tc.method, tc.path, tc.token, tc.body, tc.hdr...), tc.status, tc.field)
		})
	}
	if len(cases) < 25 {
		t.Fatalf("only %d cases", len(cases))
	}
	if after := e.snapshot(t, c.DB); after != before {
		t.Fatalf("rejected requests changed state:\nbefore %+v\nafter  %+v", before, after)
	}
}

// TestLimitExplicitNumbers: an explicit numeric parameter outside its range
// is refused naming the field, for every kind and key_by, also where 0
// would mean the default; only an absent one takes the default (a
// breaker's half_open_probes: 3). Every bad field is named at once.
func TestLimitExplicitNumbers(t *testing.T) {
	e := newEnv(t)
	c := e.start()
	lim := "/api/v1/apps/checkout/limits"
	base := map[string]string{
		"token_bucket":   `"rate":10,"burst":5`,
		"sliding_window": `"limit":10,"window":"1s"`,
		"concurrency":    `"max":4`,
		"gcra":           `"rate":10`,
		"adaptive":       `"min":1,"max":8`,
		"breaker":        `"error_rate":0.5,"min_requests":10,"window":"10s","open_duration":"5s"`,
		"throttle":       `"reserve":0.1`,
		"system":         `"reserve":0.1`,
	}
	cases := []struct{ kind, field, value string }{
		{"token_bucket", "rate", "0"}, {"token_bucket", "burst", "0"}, {"token_bucket", "burst", "-1"},
		{"sliding_window", "limit", "0"}, {"sliding_window", "window", `"0s"`},
		{"concurrency", "max", "0"}, {"concurrency", "max", "-2"},
		{"gcra", "rate", "0"}, {"gcra", "max_wait", `"-1s"`},
		{"adaptive", "min", "0"}, {"adaptive", "max", "0"}, {"adaptive", "window", `"10ms"`},
		{"breaker", "half_open_probes", "0"}, {"breaker", "half_open_probes", "-1"},
		{"breaker", "min_requests", "0"}, {"breaker", "window", `"0s"`}, {"breaker", "open_duration", `"0s"`},
		{"breaker", "error_rate", "1.5"}, {"breaker", "slow_call_rate", "-0.1"},
		{"breaker", "max_open_duration", `"1s"`}, {"breaker", "max_open_duration", `"0s"`}, {"breaker", "max_open_duration", `"-1m"`},
		{"breaker", "slow_call_duration", `"-1s"`},
		{"adaptive", "window", `"0s"`}, {"adaptive", "window", `"-1s"`},
		{"concurrency", "key_by", `{"source":"context","max_keys":0}`}, {"concurrency", "key_by", `{"source":"context","max_keys":-5}`},
		{"concurrency", "key_by", `{"source":"context","max_keys":1000001}`},
		{"token_bucket", "key_by", `{"source":"context","ttl":"0s"}`}, {"token_bucket", "key_by", `{"source":"context","ttl":"-1m"}`},
		{"throttle", "k", "0"}, {"throttle", "window", `"0s"`}, {"throttle", "min_requests", "0"},
		{"system", "cpu", "0"}, {"system", "window", `"0s"`}, {"system", "cooldown", `"0s"`},
		{"concurrency", "queue_interval", `"0s","queue_target":"5ms"`},
	}
	before := e.snapshot(t, c.DB)
	for _, tc := range cases {
		body := `{"resource":"r","kind":"` + tc.kind + `",` + base[tc.kind] + `,"` + tc.field + `":` + tc.value + `,"reason":"r"}`
		field := tc.field
		if field == "key_by" {
			field = "key_by.max_keys"
			if strings.Contains(tc.value, "ttl") {
				field = "key_by.ttl"
			}
		}
		r := mustStatus(t, call(t, c, "POST", lim, adminToken, body), 400)
		if !strings.Contains(r.str("errors"), `"field":"`+field+`"`) {
			t.Errorf("%s %s=%s: the errors do not name %s: %s", tc.kind, tc.field, tc.value, field, r.Raw)
		}
	}
	// Every bad field at once: the type error, the ranges, the parameter
	// of another kind.
	r := mustStatus(t, call(t, c, "POST", lim, adminToken, `{"resource":"r","kind":"breaker","error_rate":2,"min_requests":0,"window":"0s","open_duration":"5s","burst":3,`+
		`"max_open_duration":"0s","half_open_probes":"three","key_by":{"source":"header","ttl":"0s"},"reason":"r"}`), 400)
	for _, f := range []string{"error_rate", "min_requests", "window", "max_open_duration", "half_open_probes", "key_by.name", "key_by.ttl", "burst"} {
		if !strings.Contains(r.str("errors"), `"field":"`+f+`"`) {
			t.Errorf("the errors do not name %s: %s", f, r.Raw)
		}
	}
	if after := e.snapshot(t, c.DB); after != before {
		t.Fatalf("a refused request changed something: %+v -> %+v", before, after)
	}
	mustStatus(t, call(t, c, "POST", lim, adminToken, `{"resource":"adaptive","kind":"adaptive","min":1,"max":8,"reason":"r"}`), 201)
	mustProblem(t, call(t, c, "PATCH", lim+"/adaptive", adminToken, `{"window":"0s","reason":"r"}`), 400, "window")
	mustProblem(t, call(t, c, "PATCH", lim+"/adaptive", adminToken, `{"key_by":{"source":"context","max_keys":0},"reason":"r"}`), 400, "key_by.max_keys")
	if after := e.snapshot(t, c.DB); after.limits != before.limits+1 || after.audit != before.audit+1 {
		t.Fatalf("a refused patch changed something: %+v -> %+v", before, after)
	}
	r = mustStatus(t, call(t, c, "POST", lim, adminToken, `{"resource":"ledger","kind":"breaker",`+base["breaker"]+`,"reason":"r"}`), 201)
	if r.num("limit", "half_open_probes") != 3 {
		t.Fatalf("absent half_open_probes: want the default 3: %s", r.Raw)
	}
	mustProblem(t, call(t, c, "PATCH", lim+"/ledger", adminToken, `{"half_open_probes":0,"reason":"r"}`), 400, "half_open_probes")
	r = mustStatus(t, call(t, c, "PATCH", lim+"/ledger", adminToken, `{"half_open_probes":1,"reason":"r"}`), 200)
	if r.num("limit", "half_open_probes") != 1 {
		t.Fatalf("patched half_open_probes: %s", r.Raw)
	}
	r = mustStatus(t, call(t, c, "PATCH", lim+"/ledger", adminToken, `{"kind":"concurrency","max":3,"reason":"r"}`), 200)
	if strings.Contains(r.Raw, "half_open_probes") {
		t.Fatalf("a concurrency limit kept the breaker's probes: %s", r.Raw)
	}
	r = mustStatus(t, call(t, c, "PATCH", lim+"/ledger", adminToken, `{"kind":"breaker",`+base["breaker"]+`,"reason":"r"}`), 200)
	if r.num("limit", "half_open_probes") != 3 {
		t.Fatalf("a limit patched into a breaker: want the default probes 3: %s", r.Raw)
	}
}
