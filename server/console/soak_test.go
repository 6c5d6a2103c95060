package console_test

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/switchyard-io/switchyard/internal/etcdtest"
	"github.com/switchyard-io/switchyard/internal/fleetsim"
	"github.com/switchyard-io/switchyard/internal/pgtest"
	"github.com/switchyard-io/switchyard/server/rollout"
)

// TestSoak runs the production shape for SWITCHYARD_SOAK (a duration; the
// test is skipped without it): three consoles in child processes on one
// Postgres database and a three-member etcd cluster, a simulated fleet
// reporting (internal/fleetsim, as BenchmarkScale), operators reading and
// writing through the API, browser event streams held open, the leader's
// jobs busy (auto-trigger rules on the fleet evaluated every 5 s, staged
// rollout plans one after another on fleet switches) and a flip of a fleet
// switch every minute. It reports p50/p99 of API reads and writes, flip →
// applied N/N, each console's RSS and goroutines at minute 1 and 5 s
// before the end, etcd writes/s and the database's growth, and fails when
// goroutines or RSS grew between the two samples beyond noise (a leak).
//
//	SWITCHYARD_SOAK=10m go test ./server/console -run TestSoak -count=1 -timeout 40m -v
//
// SWITCHYARD_SOAK_INSTANCES (10000), SWITCHYARD_SOAK_OPERATORS (100) and
// SWITCHYARD_SOAK_STREAMS (50) size it; `make soak` runs it. With
// SWITCHYARD_SOAK_PROFILES=<dir> each console writes its heap profile
// there every minute.
func TestSoak(t *testing.T) {
	spec := os.Getenv("SWITCHYARD_SOAK")
	if spec == "" {
		t.Skip("soak: set SWITCHYARD_SOAK=10m (or run make soak)")
	}
	dur, err := time.ParseDuration(spec)
	if err != nil || dur < 2*time.Minute {
		t.Fatalf("SWITCHYARD_SOAK=%q: want a duration of at least 2m (the first sample is taken at minute 1)", spec)
	}
	instances := soakInt(t, "SWITCHYARD_SOAK_INSTANCES", 10000)
	operators := soakInt(t, "SWITCHYARD_SOAK_OPERATORS", 100)
	streams := soakInt(t, "SWITCHYARD_SOAK_STREAMS", 50)
	const (
		switches = 200 // checkout's, read by the fleet
		rules    = 100 // auto-trigger rules on the fleet's signals
		plans    = 4   // staged rollouts running at any time
	)

	endpoints := startEtcdCluster(t, 3)
	e := &env{t: t, pgURL: pgtest.NewDatabase(t), endpoints: strings.Join(endpoints, ",")}
	var consoles []string
	for i := range 3 {
		consoles = append(consoles, e.startProcess(fmt.Sprintf("soak-%d", i), "SWITCHYARD_RECONCILE_INTERVAL=30s").url)
	}
	hc := &http.Client{Timeout: 30 * time.Second}
	defer hc.CloseIdleConnections()
	for i := range switches {
		soakMust(t, hc, consoles[i%3], "POST", "/api/v1/apps/checkout/switches", fmt.Sprintf(`{"name":"sw-%04d","level":"L3","reason":"soak"}`, i))
	}
	// A viewer per browser: the sign-in throttle allows a username a burst
	// of 5 attempts and an address 20, per console, as it should.
	for i := range streams {
		soakMust(t, hc, consoles[i%3], "POST", "/api/v1/users", fmt.Sprintf(`{"username":"soak-viewer-%02d","password":"%s","role":"viewer","reason":"soak"}`, i, soakViewerPassword))
	}
	for i := range operators {
		soakMust(t, hc, consoles[i%3], "POST", "/api/v1/apps/ops/switches", fmt.Sprintf(`{"name":"op-%03d","level":"L3","reason":"soak"}`, i))
	}
	// Rules that watch the fleet's degraded share of the switches it reads
	// and never fire: the leader evaluates each every 5 s.
	for i := range rules {
		soakMust(t, hc, consoles[i%3], "POST", "/api/v1/apps/checkout/switches", fmt.Sprintf(`{"name":"tr-%03d","level":"L3","reason":"soak"}`, i))
		soakMust(t, hc, consoles[i%3], "POST", "/api/v1/apps/checkout/triggers", fmt.Sprintf(
			`{"name":"tr-%03d","switch":"tr-%03d","source":"fleet","query":"degraded_share{switch=\"sw-%04d\"}","trigger":{"op":">","threshold":2},"recover":{"op":"<","threshold":1},"reason":"soak"}`,
			i, i, i%switches))
	}
	for i := range plans {
		soakMust(t, hc, consoles[i%3], "POST", "/api/v1/apps/checkout/switches", fmt.Sprintf(`{"name":"pl-%d","level":"L3","reason":"soak"}`, i))
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var etcdClients []*clientv3.Client
	for range 4 {
		c, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		etcdClients = append(etcdClients, c)
	}
	fleet := fleetsim.New(instances, switches, 5, etcdClients)
	fleet.RegisterAll(ctx)
	go fleet.Report(ctx, 10*time.Second)
	t.Logf("soak: %d instances registered; %d operators, %d event streams, for %v", instances, operators, streams, dur)

	pg, err := sql.Open("pgx", e.pgURL)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	began := time.Now()
	deadline := began.Add(dur)
	// The first sample is taken a minute into the load, the last 5 s
	// before its end, both with every client connected.
	first, last := make(chan soakState, 1), make(chan soakState, 1)
	go func() {
		time.Sleep(time.Minute)
		first <- soakSample(t, ctx, hc, consoles, etcdClients[0], pg, fleet)
		time.Sleep(time.Until(deadline) - 5*time.Second)
		last <- soakSample(t, ctx, hc, consoles, etcdClients[0], pg, fleet)
	}()

	var (
		wg            sync.WaitGroup
		mu            sync.Mutex
		reads, writes []time.Duration
		failed        atomic.Int64
		streamed      soakStreams
	)
	for i := range operators {
		wg.Add(1)
		go func() {
			defer wg.Done()
			base, on := consoles[i%3], false
			nextWrite := time.Now().Add(rand.N(20 * time.Second))
			for time.Now().Before(deadline) {
				time.Sleep(500*time.Millisecond + rand.N(time.Second)) // about one request a second
				method, path, body, list := "GET", fmt.Sprintf("/api/v1/apps/checkout/switches/sw-%04d", rand.N(switches)), "", &reads
				if time.Now().After(nextWrite) { // about one write in 20 s
					on, nextWrite = !on, time.Now().Add(10*time.Second+rand.N(20*time.Second))
					method, path, body, list = "POST", fmt.Sprintf("/api/v1/apps/ops/switches/op-%03d/%s", i, map[bool]string{true: "on", false: "off"}[on]), `{"reason":"soak"}`, &writes
				}
				took, status := soakDo(hc, base, method, path, body)
				if status != http.StatusOK {
					failed.Add(1)
					continue
				}
				mu.Lock()
				*list = append(*list, took)
				mu.Unlock()
			}
		}()
	}
	streamCtx, stopStreams := context.WithDeadline(ctx, deadline)
	defer stopStreams()
	planned := make(chan soakPlanned, 1)
	go func() { planned <- soakPlans(streamCtx, t, hc, consoles, plans, min(2*time.Minute, dur/5)) }()
	for i := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			soakStream(streamCtx, t, consoles[i%3], fmt.Sprintf("soak-viewer-%02d", i), &streamed)
		}()
	}
	var flips []time.Duration
	for on := true; time.Until(deadline) > 30*time.Second; on = !on {
		flips = append(flips, soakFlip(t, hc, consoles, instances, on))
		time.Sleep(min(time.Minute, time.Until(deadline)-30*time.Second))
	}
	wg.Wait()
	start, end := <-first, <-last
	elapsed := end.at.Sub(start.at)
	ended := <-planned
	// Every rule was evaluated within its last few intervals, with a value.
	var fresh int
	if err := pg.QueryRowContext(ctx, `SELECT count(*) FROM trigger_states WHERE last_at > now() - interval '30 seconds' AND last_error = ''`).Scan(&fresh); err != nil {
		t.Fatal(err)
	}

	t.Logf("soak: %v, %d instances, %d operators, %d event streams held (%d events, %d broken), %d failed requests",
		elapsed.Round(time.Second), instances, operators, streamed.held.Load(), streamed.events.Load(), streamed.broken.Load(), failed.Load())
	t.Logf("soak: API reads  n=%d p50 %v p99 %v", len(reads), quantile(reads, 0.5), quantile(reads, 0.99))
	t.Logf("soak: API writes n=%d p50 %v p99 %v", len(writes), quantile(writes, 0.5), quantile(writes, 0.99))
	t.Logf("soak: flip → applied %d/%d: %v", instances, instances, flips)
	t.Logf("soak: trigger rules evaluated in the last 30 s without error: %d/%d; staged rollouts ended: %v, still running: %v", fresh, rules, ended.ended, ended.running)
	for i := range consoles {
		t.Logf("soak: console %d RSS %.0f → %.0f MiB, goroutines %.0f → %.0f, fleet model behind etcd by %d → %d revisions", i,
			start.rss[i]/(1<<20), end.rss[i]/(1<<20), start.goroutines[i], end.goroutines[i], start.rev-start.modelRev[i], end.rev-end.modelRev[i])
	}
	t.Logf("soak: between %v and %v: etcd %.0f writes/s (revisions; the fleet's reports %.0f/s), database %.1f → %.1f MiB (%.0f MiB/hour)",
		start.at.Sub(began).Round(time.Second), end.at.Sub(began).Round(time.Second),
		float64(end.rev-start.rev)/elapsed.Seconds(), float64(end.puts-start.puts)/elapsed.Seconds(),
		float64(start.dbBytes)/(1<<20), float64(end.dbBytes)/(1<<20), float64(end.dbBytes-start.dbBytes)/(1<<20)/elapsed.Hours())
	if f := failed.Load(); f > int64(len(reads)+len(writes))/100 {
		t.Errorf("%d of %d API requests failed", f, int64(len(reads)+len(writes))+f)
	}
	if held := streamed.held.Load(); held != int64(streams) {
		t.Errorf("%d of %d browsers held an event stream", held, streams)
	}
	if fresh != rules {
		t.Errorf("%d of %d trigger rules evaluated in the last 30 s without error", fresh, rules)
	}
	if ended.ended[rollout.Done] == 0 {
		t.Errorf("no staged rollout finished: %v", ended)
	}
	// The load is the same at both samples: what grew beyond noise leaks.
	for i := range consoles {
		if g0, g1 := start.goroutines[i], end.goroutines[i]; g1 > g0*1.2+20 {
			t.Errorf("console %d: goroutines grew from %.0f to %.0f under a steady load", i, g0, g1)
		}
		if r0, r1 := start.rss[i], end.rss[i]; r1 > r0*1.5+64<<20 {
			t.Errorf("console %d: RSS grew from %.0f to %.0f MiB under a steady load", i, r0/(1<<20), r1/(1<<20))
		}
	}
	cancel()
}

// soakPlans keeps a staged rollout running on each of checkout's switches
// pl-0…pl-<n-1> until ctx ends: a 10 % step held for hold under a fleet
// condition, then 100 %; once a plan ends the next one turns the switch
// back the same way (50 %, then off). A plan a gate paused is aborted. It
// returns how many plans ended in each state, and where the running ones
// are.
func soakPlans(ctx context.Context, t *testing.T, hc *http.Client, consoles []string, n int, hold time.Duration) soakPlanned {
	const gate = `"gate":{"conditions":[{"source":"fleet","query":"instances","op":">","threshold":0}],"interval":"10s"}`
	bodies := map[bool]string{
		true:  `{"switch":"%s","direction":"on","steps":[{"percent":10,"hold":"` + hold.String() + `"},{"percent":100}],` + gate + `,"reason":"soak"}`,
		false: `{"switch":"%s","direction":"off","steps":[{"percent":50,"hold":"` + hold.String() + `"},{"percent":0}],` + gate + `,"reason":"soak"}`,
	}
	ids, on := make([]int64, n), make([]bool, n)
	ended := map[string]int{}
	for ctx.Err() == nil {
		for i := range n {
			base := consoles[i%len(consoles)]
			if ids[i] != 0 {
				var v struct{ Rollout rollout.View }
				if status := soakCall(hc, base, "GET", fmt.Sprintf("/api/v1/apps/checkout/rollouts/%d", ids[i]), "", &v); status != http.StatusOK {
					t.Errorf("soak: plan %d: status %d", ids[i], status)
					continue
				}
				state := v.Rollout.State
				if state == rollout.Paused { // a gate held it: counted, ended, and the next one starts
					if status := soakCall(hc, base, "POST", fmt.Sprintf("/api/v1/apps/checkout/rollouts/%d/abort", ids[i]), `{"reason":"soak: paused"}`, nil); status != http.StatusOK {
						t.Errorf("soak: abort paused plan %d: status %d", ids[i], status)
					}
				} else if rollout.Active(state) {
					continue
				}
				ended[state]++
				// Where the switch is now: an aborted plan leaves it
				// partly on, a reverted one as it was.
				on[i] = state == rollout.Paused || (v.Rollout.Direction == rollout.DirectionOn) == (state == rollout.Done)
			}
			var v struct{ Rollout rollout.View }
			if status := soakCall(hc, base, "POST", "/api/v1/apps/checkout/rollouts", fmt.Sprintf(bodies[!on[i]], fmt.Sprintf("pl-%d", i)), &v); status != http.StatusCreated {
				t.Errorf("soak: start a plan on pl-%d: status %d", i, status)
				return soakPlanned{ended: ended}
			}
			ids[i] = v.Rollout.ID
		}
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Second):
		}
	}
	out := soakPlanned{ended: ended}
	for i, id := range ids {
		var v struct{ Rollout rollout.View }
		if soakCall(hc, consoles[i%len(consoles)], "GET", fmt.Sprintf("/api/v1/apps/checkout/rollouts/%d", id), "", &v) == http.StatusOK && rollout.Active(v.Rollout.State) {
			out.running = append(out.running, fmt.Sprintf("%s %s at step %d (%s)", v.Rollout.Switch, v.Rollout.State, v.Rollout.Step, v.Rollout.Note))
		}
	}
	return out
}

// soakPlanned is what soakPlans saw: plans ended, per state, and the
// plans still running at the end.
type soakPlanned struct {
	ended   map[string]int
	running []string
}

type soakState struct {
	at              time.Time
	rss, goroutines []float64
	modelRev        []int64 // each console's fleet model's etcd revision
	rev, puts       int64
	dbBytes         int64
}

var metricLine = regexp.MustCompile(`(?m)^(process_resident_memory_bytes|go_goroutines) ([0-9.e+]+)$`)

// soakSample reads each console's RSS and goroutines from its /metrics,
// etcd's revision, the fleet's reports and the database's size. It may run
// on another goroutine than the test's: it reports failures with t.Error.
func soakSample(t *testing.T, ctx context.Context, hc *http.Client, consoles []string, cli *clientv3.Client, pg *sql.DB, fleet *fleetsim.Fleet) soakState {
	s := soakState{at: time.Now(), puts: fleet.Puts()}
	for _, base := range consoles {
		resp, err := hc.Get(base + "/metrics")
		if err != nil {
			t.Error(err)
			return s
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		v := map[string]float64{}
		for _, m := range metricLine.FindAllStringSubmatch(string(b), -1) {
			v[m[1]], _ = strconv.ParseFloat(m[2], 64)
		}
		s.rss = append(s.rss, v["process_resident_memory_bytes"])
		s.goroutines = append(s.goroutines, v["go_goroutines"])
		var sig struct{ Revision int64 }
		if status := soakCall(hc, base, "GET", "/api/v1/apps/ops/switches/op-000/signals", "", &sig); status != http.StatusOK {
			t.Errorf("soak: fleet revision of %s: status %d", base, status)
		}
		s.modelRev = append(s.modelRev, sig.Revision)
	}
	r, err := cli.Get(ctx, "soak-probe")
	if err != nil {
		t.Error(err)
		return s
	}
	s.rev = r.Header.Revision
	if err := pg.QueryRowContext(ctx, "SELECT pg_database_size(current_database())").Scan(&s.dbBytes); err != nil {
		t.Error(err)
	}
	return s
}

// soakFlip turns checkout/sw-0000 on or off through one console and
// returns how long until every instance applied it, as another console's
// fleet view says.
func soakFlip(t *testing.T, hc *http.Client, consoles []string, instances int, on bool) time.Duration {
	t.Helper()
	before := soakSignals(t, hc, consoles[1])
	flipped := time.Now()
	soakMust(t, hc, consoles[0], "POST", "/api/v1/apps/checkout/switches/sw-0000/"+map[bool]string{true: "on", false: "off"}[on], `{"reason":"soak flip"}`)
	for {
		s := soakSignals(t, hc, consoles[1])
		if s.Revision > before.Revision && s.Applied == instances && s.Live == instances {
			return time.Since(flipped).Round(time.Millisecond)
		}
		if time.Since(flipped) > time.Minute {
			t.Errorf("flip applied by %d of %d live after a minute", s.Applied, s.Live)
			return time.Since(flipped)
		}
		time.Sleep(500 * time.Millisecond) // each answer lists every instance
	}
}

type switchSignals struct {
	Revision int64 `json:"revision"`
	Applied  int   `json:"applied"`
	Live     int   `json:"live"`
}

// soakSignals reads the fleet's view of checkout/sw-0000.
func soakSignals(t *testing.T, hc *http.Client, base string) switchSignals {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/api/v1/apps/checkout/switches/sw-0000/signals", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v struct {
		Signals switchSignals `json:"signals"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatalf("signals: %v", err)
	}
	return v.Signals
}

// soakDo makes one API request as the admin and returns its time and status.
func soakDo(hc *http.Client, base, method, path, body string) (time.Duration, int) {
	began := time.Now()
	status := soakCall(hc, base, method, path, body, nil)
	return time.Since(began), status
}

// soakCall makes one API request as the admin, decodes a successful
// answer into out (unless nil) and returns the status (0: no answer).
func soakCall(hc *http.Client, base, method, path, body string, out any) int {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, base+path, rd)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	if out != nil && resp.StatusCode/100 == 2 {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			return 0
		}
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

func soakMust(t *testing.T, hc *http.Client, base, method, path, body string) {
	t.Helper()
	if status := soakCall(hc, base, method, path, body, nil); status/100 != 2 {
		t.Fatalf("%s %s: status %d", method, path, status)
	}
}

// soakViewerPassword is the password of the viewers the event streams
// sign in as.
const soakViewerPassword = "soak-viewer-password-123"

var csrfField = regexp.MustCompile(`name="_csrf" value="([^"]+)"`)

// soakStream signs in to the web console as a browser would (viewer user) and holds its
// event stream (with fleet updates) open until ctx ends, counting events;
// a stream the console ends early counts as broken and is opened again.
// soakStreams counts what the browsers' event streams saw: browsers that
// held a stream, events, and streams that ended early.
type soakStreams struct{ held, events, broken atomic.Int64 }

func soakStream(ctx context.Context, t *testing.T, base, user string, n *soakStreams) {
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	defer hc.CloseIdleConnections()
	resp, err := hc.Get(base + "/ui/login")
	if err != nil {
		t.Error(err)
		return
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := csrfField.FindSubmatch(page)
	if m == nil {
		t.Error("soak: no CSRF token on /ui/login")
		return
	}
	resp, err = hc.PostForm(base+"/ui/login", url.Values{"_csrf": {string(m[1])}, "username": {user}, "password": {soakViewerPassword}, "next": {"/ui/"}})
	if err != nil {
		t.Errorf("soak: sign in: %v", err)
		return
	}
	if resp.Body.Close(); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("soak: sign in as %s: status %d", user, resp.StatusCode)
		return
	}
	for held := false; ctx.Err() == nil; {
		req, _ := http.NewRequestWithContext(ctx, "GET", base+"/ui/events?fleet=1", nil)
		req.Header.Set("Accept", "text/event-stream")
		resp, err := hc.Do(req)
		if err != nil {
			if ctx.Err() == nil {
				n.broken.Add(1)
				time.Sleep(time.Second)
			}
			continue
		}
		if resp.StatusCode != http.StatusOK {
			resp.Body.Close()
			t.Errorf("soak: %s's event stream: status %d", user, resp.StatusCode)
			return
		}
		if !held {
			held = true
			n.held.Add(1)
		}
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "data:") {
				n.events.Add(1)
			}
		}
		resp.Body.Close()
		if ctx.Err() == nil {
			n.broken.Add(1)
		}
	}
}

func soakInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}

func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))].Round(100 * time.Microsecond)
}

// startEtcdCluster starts an n-member etcd cluster in this process, as
// production runs one (periodic compaction, a raised quota), and returns
// its client URLs; it stops when the test ends.
func startEtcdCluster(t *testing.T, n int) []string {
	t.Helper()
	var peers, clients []url.URL
	var initial []string
	for i := range n {
		c, _ := url.Parse("http://" + etcdtest.FreeAddr(t))
		p, _ := url.Parse("http://" + etcdtest.FreeAddr(t))
		clients, peers = append(clients, *c), append(peers, *p)
		initial = append(initial, fmt.Sprintf("m%d=%s", i, p))
	}
	members := make([]*embed.Etcd, n)
	errs := make(chan error, n)
	for i := range n {
		cfg := embed.NewConfig()
		cfg.Name = fmt.Sprintf("m%d", i)
		cfg.Dir = t.TempDir()
		cfg.ListenClientUrls, cfg.AdvertiseClientUrls = clients[i:i+1], clients[i:i+1]
		cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = peers[i:i+1], peers[i:i+1]
		cfg.InitialCluster = strings.Join(initial, ",")
		cfg.InitialClusterToken = "soak"
		cfg.AutoCompactionMode = embed.CompactorModePeriodic
		cfg.AutoCompactionRetention = "5m"
		cfg.QuotaBackendBytes = 8 << 30
		cfg.LogLevel = "error"
		cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
		go func() {
			e, err := embed.StartEtcd(cfg)
			members[i] = e
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		for _, m := range members {
			m.Close()
		}
	})
	for _, m := range members {
		select {
		case <-m.Server.ReadyNotify():
		case <-time.After(60 * time.Second):
			t.Fatal("etcd cluster not ready in 60s")
		}
	}
	var out []string
	for _, c := range clients {
		out = append(out, c.String())
	}
	return out
}
