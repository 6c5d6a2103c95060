package console_test

import (
	"strings"
	"testing"
)

// TestExpiryBadInput: channel, renew and findings requests that must each
// be refused with the right status and a problem document naming the
// field (and listing every bad field), changing no row, etcd key or audit
// event.
func TestExpiryBadInput(t *testing.T) {
	e := newEnv(t)
	c := e.start()
	waitLeader(t, c)
	sw := "/api/v1/apps/checkout/switches"
	mustStatus(t, call(t, c, "POST", sw, adminToken, `{"name":"search","level":"L3","reason":"seed"}`), 201)
	mustStatus(t, call(t, c, "POST", sw, adminToken, `{"name":"live","level":"L3","reason":"seed"}`), 201)
	mustStatus(t, call(t, c, "POST", sw+"/live/on", adminToken, `{"reason":"seed"}`), 200)
	mustStatus(t, call(t, c, "POST", "/api/v1/channels", adminToken, `{"name":"ops","url":"https://hooks.example.com/x","secret":"0123456789abcdef","events":["*"],"reason":"seed"}`), 201)
	viewerTok := mustStatus(t, call(t, c, "POST", "/api/v1/tokens", adminToken, `{"name":"viewer","role":"viewer","reason":"read only"}`), 201).str("token")
	opTok := mustStatus(t, call(t, c, "POST", "/api/v1/tokens", adminToken, `{"name":"ops","role":"operator","apps":["checkout"],"reason":"checkout team"}`), 201).str("token")
	ch := "/api/v1/channels"
	good := func(field, value string) string {
		fields := map[string]string{"name": `"pager"`, "url": `"https://hooks.example.com/y"`, "secret": `"0123456789abcdef"`, "events": `["expiry.reminder"]`, "format": `"json"`, "reason": `"r"`}
		if value == "" {
			delete(fields, field)
		} else {
			fields[field] = value
		}
		var parts []string
		for k, v := range fields {
			parts = append(parts, `"`+k+`":`+v)
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
	cases := []struct {
		name, method, path, token, body string
		status                          int
		field                           string
		errors                          int // the problem's errors list at least this many
	}{
		{"channel URL ftp", "POST", ch, adminToken, good("url", `"ftp://files.example.com/hook"`), 400, "url", 1},
		{"channel URL javascript", "POST", ch, adminToken, good("url", `"javascript:alert(1)"`), 400, "url", 1},
		{"channel URL without host", "POST", ch, adminToken, good("url", `"https://"`), 400, "url", 1},
		{"channel URL not a URL", "POST", ch, adminToken, good("url", `"hooks"`), 400, "url", 1},
		{"channel URL with a newline", "POST", ch, adminToken, good("url", `"https://a.example.com/\nx"`), 400, "url", 1},
		{"channel empty secret", "POST", ch, adminToken, good("secret", `""`), 400, "secret", 1},
		{"channel without secret", "POST", ch, adminToken, good("secret", ""), 400, "secret", 1},
		{"channel short secret", "POST", ch, adminToken, good("secret", `"short"`), 400, "secret", 1},
		{"channel unknown event", "POST", ch, adminToken, good("events", `["expiry.reminder","switch.exploded"]`), 400, "events", 1},
		{"channel no events", "POST", ch, adminToken, good("events", `[]`), 400, "events", 1},
		{"channel bad format", "POST", ch, adminToken, good("format", `"xml"`), 400, "format", 1},
		{"channel bad name", "POST", ch, adminToken, good("name", `"Pager Duty"`), 400, "name", 1},
		{"channel bad app", "POST", ch, adminToken, good("apps", `["Check Out"]`), 400, "apps", 1},
		{"channel without reason", "POST", ch, adminToken, good("reason", ""), 400, "reason", 1},
		{"channel every field bad", "POST", ch, adminToken, `{"name":"x","url":"ftp://x","secret":"","events":["nope"],"format":"xml","reason":"r"}`, 400, "url", 4},
		{"channel unknown field", "POST", ch, adminToken, good("colour", `"red"`), 400, "colour", 1},
		{"channel events not a list", "POST", ch, adminToken, good("events", `"expiry.reminder"`), 400, "events", 1},
		{"duplicate channel", "POST", ch, adminToken, good("name", `"ops"`), 409, "name", 0},
		{"viewer creates a channel", "POST", ch, viewerTok, good("", ""), 403, "", 0},
		{"operator creates a channel", "POST", ch, opTok, good("", ""), 403, "", 0},
		{"viewer lists channels", "GET", ch, viewerTok, "", 403, "", 0},
		{"operator reads the delivery log", "GET", "/api/v1/deliveries", opTok, "", 403, "", 0},
		{"patch channel unknown event", "PATCH", ch + "/ops", adminToken, `{"events":["nope"],"reason":"r"}`, 400, "events", 1},
		{"patch channel bad URL", "PATCH", ch + "/ops", adminToken, `{"url":"gopher://x","reason":"r"}`, 400, "url", 1},
		{"patch channel empty secret", "PATCH", ch + "/ops", adminToken, `{"secret":"","reason":"r"}`, 400, "secret", 1},
		{"patch channel stale version", "PATCH", ch + "/ops", adminToken, `{"format":"slack","version":9,"reason":"r"}`, 409, "version", 0},
		{"patch channel without reason", "PATCH", ch + "/ops", adminToken, `{"format":"slack"}`, 400, "reason", 1},
		{"patch unknown channel", "PATCH", ch + "/nope", adminToken, `{"format":"slack","reason":"r"}`, 404, "", 0},
		{"delete channel without reason", "DELETE", ch + "/ops", adminToken, "", 400, "reason", 1},
		{"delete channel stale version", "DELETE", ch + "/ops?reason=r&version=9", adminToken, "", 409, "version", 0},
		{"test unknown channel", "POST", ch + "/nope/test", adminToken, `{"reason":"r"}`, 404, "", 0},
		{"test without reason", "POST", ch + "/ops/test", adminToken, `{}`, 400, "reason", 0},
		{"operator sends a test", "POST", ch + "/ops/test", opTok, "", 403, "", 0},
		{"deliveries bad status", "GET", "/api/v1/deliveries?status=lost", adminToken, "", 400, "status", 1},
		{"deliveries bad limit", "GET", "/api/v1/deliveries?limit=100000", adminToken, "", 400, "limit", 1},
		{"deliveries bad cursor", "GET", "/api/v1/deliveries?cursor=-3", adminToken, "", 400, "cursor", 1},
		{"renew without reason", "POST", sw + "/live/renew", adminToken, `{}`, 400, "reason", 1},
		{"renew without a body or reason", "POST", sw + "/live/renew", adminToken, "", 400, "reason", 1},
		{"renew blank reason", "POST", sw + "/live/renew", adminToken, `{"reason":"  "}`, 400, "reason", 1},
		{"renew a switch that is off", "POST", sw + "/search/renew", adminToken, `{"reason":"keep it"}`, 400, "state", 1},
		{"renew stale version", "POST", sw + "/live/renew", adminToken, `{"reason":"r","version":1}`, 409, "version", 0},
		{"renew unknown switch", "POST", sw + "/nope/renew", adminToken, `{"reason":"r"}`, 404, "", 0},
		{"renew unknown field", "POST", sw + "/live/renew", adminToken, `{"reason":"r","until":"forever"}`, 400, "until", 1},
		{"viewer renews", "POST", sw + "/live/renew", viewerTok, `{"reason":"r"}`, 403, "", 0},
		{"renew reason with a newline", "POST", sw + "/live/renew", adminToken, `{"reason":"ok\nforged"}`, 400, "reason", 1},
		{"findings bad kind", "GET", "/api/v1/findings?kind=bored", adminToken, "", 400, "kind", 1},
		{"findings bad state", "GET", "/api/v1/findings?state=closed", adminToken, "", 400, "state", 1},
		{"findings bad limit", "GET", "/api/v1/findings?limit=0", adminToken, "", 400, "limit", 1},
		{"findings bad app", "GET", "/api/v1/findings?app=Check%20Out", adminToken, "", 400, "app", 1},
		{"findings every filter bad", "GET", "/api/v1/findings?kind=x&state=y&limit=z", adminToken, "", 400, "kind", 3},
	}
	count := func(table string) int64 {
		var n int64
		if err := c.DB.Table(table).Count(&n).Error; err != nil {
			t.Fatal(err)
		}
		return n
	}
	type counts struct {
		core                                                            snapshot
		channels, deliveries, notifications, findings, expiries, events int64
	}
	take := func() counts {
		return counts{e.snapshot(t, c.DB), count("channels"), count("deliveries"), count("notifications"), count("findings"), count("expiry_states"), count("audit_events")}
	}
	before := take()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := mustProblem(t, call(t, c, tc.method, tc.path, tc.token, tc.body), tc.status, tc.field)
			if errs, _ := r.Body["errors"].([]any); len(errs) < tc.errors {
				t.Fatalf("%d errors listed, want %d: %s", len(errs), tc.errors, r.Raw)
			}
		})
	}
	if after := take(); after != before {
		t.Fatalf("rejected requests changed state:\nbefore %+v\nafter  %+v", before, after)
	}
	t.Logf("%d rejected requests: no row, etcd key or audit event changed", len(cases))
}
