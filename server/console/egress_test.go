package console_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/switchyard-io/switchyard/internal/servertest"
	"github.com/switchyard-io/switchyard/server/console"
)

// canaryBody is what the inside services answer: it must never show up
// in an API answer of a refused attempt.
const canaryBody = "INSIDE-ONLY-7f3a"

// canary is a service beside the console that no probe or webhook may
// reach unless allowlisted; it counts every request.
type canary struct {
	srv  *httptest.Server
	hits atomic.Int64
	port string
}

func newCanary(t *testing.T, network, addr string) *canary {
	t.Helper()
	l, err := net.Listen(network, addr)
	if err != nil {
		t.Skipf("no %s listener on %s: %v", network, addr, err)
	}
	c := &canary{}
	c.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.hits.Add(1)
		w.WriteHeader(http.StatusTeapot)
		fmt.Fprint(w, canaryBody)
	}))
	c.srv.Listener = l
	c.srv.Start()
	t.Cleanup(c.srv.Close)
	_, c.port, _ = net.SplitHostPort(l.Addr().String())
	return c
}

// startDNS serves A records for names (lower case, no trailing dot) on a
// loopback UDP port and returns a resolver that asks it: the name a user
// saves passes the save-time check and resolves to loopback when dialled.
func startDNS(t *testing.T, names map[string][4]byte) *net.Resolver {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if ans := dnsAnswer(buf[:n], names); ans != nil {
				_, _ = pc.WriteTo(ans, from)
			}
		}
	}()
	addr := pc.LocalAddr().String()
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "udp", addr)
	}}
}

// dnsAnswer answers one query: its A record if names has it, else no
// records (NOERROR), so AAAA lookups come back empty.
func dnsAnswer(q []byte, names map[string][4]byte) []byte {
	if len(q) < 12 {
		return nil
	}
	var labels []string
	i := 12
	for i < len(q) && q[i] != 0 {
		n := int(q[i])
		if i+1+n > len(q) {
			return nil
		}
		labels = append(labels, string(q[i+1:i+1+n]))
		i += 1 + n
	}
	end := i + 5 // the zero label, QTYPE, QCLASS
	if end > len(q) {
		return nil
	}
	qtype := binary.BigEndian.Uint16(q[i+1:])
	ip, ok := names[strings.ToLower(strings.Join(labels, "."))]
	out := append([]byte{}, q[:2]...)
	out = append(out, 0x81, 0x80, 0, 1, 0, 0, 0, 0, 0, 0) // response, recursion; 1 question
	out = append(out, q[12:end]...)
	if ok && qtype == 1 {
		out[7] = 1 // one answer
		out = append(out, 0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4)
		out = append(out, ip[:]...)
	}
	return out
}

// egressCase is one attempt to reach inside through a drill probe and a
// webhook channel.
type egressCase struct {
	name    string
	url     string
	method  string
	literal bool   // refused when saved; else saved and refused when dialled
	verdict string // what a refused run or delivery says
	canary  bool   // the target is a canary: allowlisted, it is reached
}

// TestEgressGuard tries to reach the console's etcd, its database, its own
// API, the metadata service, loopback in every spelling, a private address,
// a name that resolves to loopback and a redirect to loopback, each through
// a drill probe and a webhook channel. Each attempt is refused (at save
// when the host is literal, else as the run's verdict or the delivery's
// error); nothing reaches the inside services, no etcd key is written and
// nothing of theirs is reflected. With the targets allowlisted, the same
// attempts pass the guard.
func TestEgressGuard(t *testing.T) {
	e := newEnv(t)
	in4 := newCanary(t, "tcp4", "127.0.0.1:0")
	in6 := newCanary(t, "tcp6", "[::1]:0")
	redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, in4.srv.URL+"/stolen", http.StatusFound)
	}))
	t.Cleanup(redirector.Close)
	resolver := startDNS(t, map[string][4]byte{"inside.switchyard.test": {127, 0, 0, 1}, "localhost": {127, 0, 0, 1}})
	etcdHost := strings.TrimPrefix(e.etcd.Endpoint, "http://")
	pg, _ := url.Parse(e.pgURL)

	// The redirector stands for an outside host: allowlisted in both runs.
	e.allowEgress(redirector.Listener.Addr().String())
	c := e.startWith([]console.Option{console.WithEgressResolver(resolver)}, steadyLeader)
	waitLeader(t, c)
	self := c.Addr()

	p4 := in4.port
	cases := []egressCase{
		{"literal loopback", "http://127.0.0.1:" + p4 + "/", "", true, "loopback", true},
		{"etcd client port, JSON gateway put", "http://" + etcdHost + "/v3/kv/put", "POST", true, "console's own endpoint", false},
		{"decimal loopback", "http://2130706433:" + p4 + "/", "", true, "loopback", true},
		{"hex loopback", "http://0x7f.1:" + p4 + "/", "", true, "loopback", true},
		{"octal loopback", "http://0177.0.0.1:" + p4 + "/", "", true, "loopback", true},
		{"IPv6 loopback", "http://[::1]:" + in6.port + "/", "", true, "loopback", true},
		{"IPv4-mapped IPv6 loopback", "http://[::ffff:127.0.0.1]:" + p4 + "/", "", true, "loopback", true},
		{"localhost with a trailing dot", "http://localhost.:" + p4 + "/", "", true, "loopback", true},
		{"metadata service", "http://169.254.169.254/latest/meta-data/iam/", "", true, "metadata", false},
		{"private address", "http://10.23.0.7:8080/admin", "", true, "private", false},
		{"the console's own API", "http://" + self + "/api/v1/tokens", "", true, "console's own endpoint", false},
		{"the console's database", "http://" + pg.Host + "/", "", true, "console's own endpoint", false},
		{"a name that resolves to 127.0.0.1", "http://inside.switchyard.test:" + p4 + "/", "", false, "loopback", true},
		{"a redirect to loopback", redirector.URL + "/go", "", false, "302", false},
	}

	const app = "shop-egress"
	mustStatus(t, call(t, c, "POST", "/api/v1/apps/"+app+"/switches", adminToken,
		`{"name":"recommend","level":"L1","fallback":{"items":[]},"reason":"seed"}`), 201)
	startDrillTarget(t, e, app, svcCorrect, 1) // the preflight wants a live instance
	waitInstances(t, c, app, 1)
	keysBefore := etcdKeys(t, e)
	attempts := 0
	for i, tc := range cases {
		// Through a drill probe.
		name := fmt.Sprintf("d%d", i)
		body := drillBody(name, tc)
		r := call(t, c, "POST", "/api/v1/apps/"+app+"/drills", adminToken, body)
		attempts++
		if tc.literal {
			mustProblem(t, r, 400, "probes[0].url")
			if !strings.Contains(r.Raw, "egress") || !strings.Contains(r.Raw, tc.verdict) {
				t.Errorf("%s: drill refusal does not say why: %s", tc.name, r.Raw)
			}
		} else {
			mustStatus(t, r, 201)
			mustStatus(t, call(t, c, "POST", "/api/v1/apps/"+app+"/drills/"+name+"/runs", adminToken, `{"reason":"try","dry_run":true}`), 202)
			v := waitRunOf(t, c, app, name, 1, 20*time.Second)
			if v.Outcome != "failed" || !strings.Contains(v.Summary, tc.verdict) {
				t.Errorf("%s: dry run %s: %s; want failed naming %q", tc.name, v.Outcome, v.Summary, tc.verdict)
			}
		}
		// Through a webhook channel.
		ch := fmt.Sprintf("c%d", i)
		r = call(t, c, "POST", "/api/v1/channels", adminToken,
			fmt.Sprintf(`{"name":%q,"url":%q,"secret":%q,"events":["channel.test"],"reason":"try"}`, ch, tc.url, hookSecret))
		attempts++
		if tc.literal {
			mustProblem(t, r, 400, "url")
			if !strings.Contains(r.Raw, "egress") {
				t.Errorf("%s: channel refusal does not say why: %s", tc.name, r.Raw)
			}
		} else {
			mustStatus(t, r, 201)
			d := mustStatus(t, call(t, c, "POST", "/api/v1/channels/"+ch+"/test", adminToken, `{"reason":"try"}`), 200)
			if d.str("delivery", "status") != "failed" || !strings.Contains(d.Raw, tc.verdict) {
				t.Errorf("%s: test delivery: %s; want failed naming %q", tc.name, d.Raw, tc.verdict)
			}
			if strings.Contains(d.Raw, canaryBody) {
				t.Errorf("%s: the inside answer is reflected: %s", tc.name, d.Raw)
			}
		}
	}
	if attempts < 20 {
		t.Fatalf("only %d attempts", attempts)
	}
	if n := in4.hits.Load() + in6.hits.Load(); n != 0 {
		t.Fatalf("the inside services got %d requests", n)
	}
	for _, path := range []string{"/api/v1/apps/" + app + "/drills", "/api/v1/deliveries", "/api/v1/audit"} {
		if r := call(t, c, "GET", path, adminToken, ""); strings.Contains(r.Raw, canaryBody) {
			t.Fatalf("%s reflects an inside answer: %s", path, r.Raw)
		}
	}
	if after := etcdKeys(t, e); len(after) != len(keysBefore) {
		t.Fatalf("etcd keys changed: %d before, %d after: %v", len(keysBefore), len(after), after)
	}
	t.Logf("%d attempts refused; inside services untouched", attempts)

	// Allowlisted, the same targets pass the guard: saved, and the canaries
	// answer the probes and deliveries.
	stop(c)
	e.allowEgress("127.0.0.0/8")
	e.allowEgress("::1/128")
	e.allowEgress("169.254.169.254/32")
	e.allowEgress("10.23.0.7:8080")
	c = e.startWith([]console.Option{console.WithEgressResolver(resolver)}, steadyLeader)
	waitLeader(t, c)
	const app2 = "shop-egress-allowed"
	mustStatus(t, call(t, c, "POST", "/api/v1/apps/"+app2+"/switches", adminToken,
		`{"name":"recommend","level":"L1","fallback":{"items":[]},"reason":"seed"}`), 201)
	startDrillTarget(t, e, app2, svcCorrect, 1)
	waitInstances(t, c, app2, 1)
	for i, tc := range cases {
		name, ch := fmt.Sprintf("a%d", i), fmt.Sprintf("a%d", i)
		if tc.name == "the console's own API" {
			tc.url = "http://" + c.Addr() + "/api/v1/tokens" // the new console's address
		}
		mustStatus(t, call(t, c, "POST", "/api/v1/apps/"+app2+"/drills", adminToken, drillBody(name, tc)), 201)
		mustStatus(t, call(t, c, "POST", "/api/v1/channels", adminToken,
			fmt.Sprintf(`{"name":%q,"url":%q,"secret":%q,"events":["channel.test"],"reason":"try"}`, ch, tc.url, hookSecret)), 201)
		if !tc.canary {
			continue
		}
		before := in4.hits.Load() + in6.hits.Load()
		mustStatus(t, call(t, c, "POST", "/api/v1/apps/"+app2+"/drills/"+name+"/runs", adminToken, `{"reason":"try","dry_run":true}`), 202)
		v := waitRunOf(t, c, app2, name, 1, 20*time.Second)
		if strings.Contains(v.Summary, "egress") {
			t.Errorf("%s allowlisted: dry run still refused: %s", tc.name, v.Summary)
		}
		d := mustStatus(t, call(t, c, "POST", "/api/v1/channels/"+ch+"/test", adminToken, `{"reason":"try"}`), 200)
		if d.num("delivery", "response_code") != http.StatusTeapot {
			t.Errorf("%s allowlisted: delivery %s", tc.name, d.Raw)
		}
		if got := in4.hits.Load() + in6.hits.Load() - before; got != 2 {
			t.Errorf("%s allowlisted: the canary got %d requests, want 2 (probe and delivery)", tc.name, got)
		}
	}
}

// drillBody is a drill of switch recommend probing tc's target once.
func drillBody(name string, tc egressCase) string {
	method := ""
	if tc.method != "" {
		method = fmt.Sprintf(`,"method":%q,"body":"{\"key\":\"L2V2aWw=\",\"value\":\"eA==\"}"`, tc.method)
	}
	return fmt.Sprintf(`{"name":%q,"switch":"recommend","target":{"percent":100},"duration":"1m",`+
		`"probes":[{"url":%q%s,"requests":1,"timeout":"2s"}],"reason":"try"}`, name, tc.url, method)
}

// waitRunOf waits until run n of drill name of app has finished.
func waitRunOf(t *testing.T, c *console.Console, app, name string, n int, within time.Duration) drillRun {
	t.Helper()
	var v drillRun
	servertest.Eventually(t, within, fmt.Sprintf("run %s/%s #%d finishes", app, name, n), func() bool {
		r := mustStatus(t, call(t, c, "GET", fmt.Sprintf("/api/v1/apps/%s/drills/%s/runs/%d", app, name, n), adminToken, ""), 200)
		v = drillRun{Outcome: r.str("run", "outcome"), Summary: r.str("run", "summary"), Finished: r.str("run", "finished_at") != ""}
		return v.Finished
	})
	return v
}

type drillRun struct {
	Outcome, Summary string
	Finished         bool
}

// etcdKeys lists every key in the env's etcd but the election's and the
// instances' (which come and go on their own).
func etcdKeys(t *testing.T, e *env) []string {
	t.Helper()
	resp, err := e.cli.Get(context.Background(), "", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, kv := range resp.Kvs {
		if k := string(kv.Key); !strings.Contains(k, "/election/") && !strings.Contains(k, "/instances/") {
			out = append(out, k)
		}
	}
	return out
}

// TestEgressAllEmbedded: on the embedded defaults (the quickstart) a drill
// may probe a demo on loopback, and the start-up lines say so; the
// console's own listener and its embedded etcd's ports stay refused.
func TestEgressAllEmbedded(t *testing.T) {
	cfg := embeddedConfig(t)
	c, err := console.Start(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stop(c)
	var out strings.Builder
	c.Describe(&out)
	if !strings.Contains(out.String(), "loopback allowed for drill probes and webhooks") {
		t.Fatalf("start-up lines do not say loopback is allowed:\n%s", out.String())
	}
	waitLeader(t, c)
	mustStatus(t, call(t, c, "POST", "/api/v1/apps/checkout/switches", adminToken,
		`{"name":"recommend","level":"L1","fallback":{"items":[]},"reason":"seed"}`), 201)
	demo := egressCase{url: "http://127.0.0.1:8070/products/p1"}
	mustStatus(t, call(t, c, "POST", "/api/v1/apps/checkout/drills", adminToken, drillBody("demo", demo)), 201)
	for i, target := range []string{c.Addr(), hostPort(cfg.EmbeddedEtcdURL), hostPort(cfg.EmbeddedEtcdPeer)} {
		for _, host := range []string{"127.0.0.1", "localhost", "[::1]"} {
			_, port, _ := net.SplitHostPort(target)
			tc := egressCase{url: "http://" + host + ":" + port + "/v3/kv/range"}
			r := call(t, c, "POST", "/api/v1/apps/checkout/drills", adminToken, drillBody(fmt.Sprintf("own%d", i), tc))
			mustProblem(t, r, 400, "probes[0].url")
			if !strings.Contains(r.Raw, "console's own endpoint") {
				t.Fatalf("%s: %s", tc.url, r.Raw)
			}
		}
	}
}

// TestProbeRightsAndExcerpts: an operator probes with GET or HEAD and no
// headers of their own unless an admin allowlisted the host; an admin may
// do more. A failing answer is kept as a short, cleaned excerpt, shown
// with the probe's query string only to those who may change the app;
// a PATCH that sends the hidden header value back keeps the stored one.
func TestProbeRightsAndExcerpts(t *testing.T) {
	e := newEnv(t)
	long := strings.Repeat("x", 3000)
	var sent atomic.Value
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sent.Store(r.Header.Get("X-Token"))
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprint(w, "\x1b[31mboom\x00\r\nsecret-inside "+long)
	}))
	t.Cleanup(target.Close)
	const app = "shop-rights"
	startDrillTarget(t, e, app, svcCorrect, 1)
	c := e.start(steadyLeader)
	waitLeader(t, c)
	waitInstances(t, c, app, 1)
	mustStatus(t, call(t, c, "POST", "/api/v1/apps/"+app+"/switches", adminToken,
		`{"name":"recommend","level":"L1","fallback":{"items":[]},"reason":"seed"}`), 201)
	opTok := mustStatus(t, call(t, c, "POST", "/api/v1/tokens", adminToken, `{"name":"ops","role":"operator","apps":["`+app+`"],"reason":"team"}`), 201).str("token")
	viewTok := mustStatus(t, call(t, c, "POST", "/api/v1/tokens", adminToken, `{"name":"view","role":"viewer","reason":"reads"}`), 201).str("token")

	probeURL := "http://outside.invalid:8080/api?token=q-secret-77"
	mk := func(name, extra string) string {
		return fmt.Sprintf(`{"name":%q,"switch":"recommend","target":{"percent":100},"duration":"1m","probes":[{"url":%q%s,"requests":1}],"reason":"r"}`, name, probeURL, extra)
	}
	base := "/api/v1/apps/" + app + "/drills"
	mustProblem(t, call(t, c, "POST", base, opTok, mk("p1", `,"method":"POST"`)), 400, "probes[0].method")
	mustProblem(t, call(t, c, "POST", base, opTok, mk("p2", `,"headers":{"Metadata-Flavor":"Google"}`)), 400, "probes[0].headers")
	mustStatus(t, call(t, c, "POST", base, opTok, mk("p3", `,"method":"HEAD"`)), 201)
	mustStatus(t, call(t, c, "POST", base, adminToken, mk("p4", `,"method":"PUT","headers":{"X-Token":"hdr-secret-99"}`)), 201)

	// An allowlisted host: the operator may POST with headers.
	probeURL = target.URL + "/api?token=q-secret-77"
	e.allowEgress(target.Listener.Addr().String())
	mustStatus(t, call(t, c, "POST", base, opTok, mk("fail", `,"method":"POST","headers":{"X-Token":"hdr-secret-99"}`)), 201)
	// A PATCH of the probes that echoes (hidden) keeps the value.
	got := mustStatus(t, call(t, c, "GET", base+"/fail", opTok, ""), 200)
	probes := got.str("drill", "probes")
	if !strings.Contains(probes, `"(hidden)"`) || strings.Contains(got.Raw, "hdr-secret-99") {
		t.Fatalf("header value shown: %s", got.Raw)
	}
	mustStatus(t, call(t, c, "PATCH", base+"/fail", opTok, `{"probes":`+probes+`,"reason":"same probes"}`), 200)
	mustStatus(t, call(t, c, "POST", base+"/fail/runs", opTok, `{"reason":"try","dry_run":true}`), 202)
	waitRunOf(t, c, app, "fail", 1, 20*time.Second)

	runPath := base + "/fail/runs/1"
	op := mustStatus(t, call(t, c, "GET", runPath, opTok, ""), 200).Raw
	if !strings.Contains(op, "secret-inside") || !strings.Contains(op, "q-secret-77") {
		t.Fatalf("the operator does not see the excerpt and the query: %s", op)
	}
	var run struct {
		Run struct {
			Report struct {
				Baseline []struct {
					FirstFailure struct{ Body string } `json:"first_failure"`
				} `json:"baseline_probes"`
			} `json:"report"`
		} `json:"run"`
	}
	_ = jsonUnmarshal(op, &run)
	body := run.Run.Report.Baseline[0].FirstFailure.Body
	if len(body) > 1024+len("…") || strings.ContainsAny(body, "\x1b\x00\r\n") || !strings.HasPrefix(body, "[31mboom") {
		t.Fatalf("excerpt %d bytes %q", len(body), body)
	}
	// The header value reached the target (the PATCH kept it), and no
	// answer shows it.
	if v, _ := sent.Load().(string); v != "hdr-secret-99" {
		t.Fatalf("the probe sent X-Token %q", v)
	}
	for _, who := range []string{viewTok, opTok, adminToken} {
		for _, p := range []string{runPath, runPath + "/report.md", runPath + "/report.json", base + "/fail"} {
			r := call(t, c, "GET", p, who, "")
			if strings.Contains(r.Raw, "hdr-secret-99") {
				t.Fatalf("%s shows a header value: %s", p, r.Raw)
			}
			if who == viewTok && (strings.Contains(r.Raw, "secret-inside") || strings.Contains(r.Raw, "q-secret-77")) {
				t.Fatalf("a viewer sees the excerpt or the query on %s: %s", p, r.Raw)
			}
		}
	}
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }
