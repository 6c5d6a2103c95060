package signal_test

import (
	"context"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/promtest"
	"github.com/switchyard-io/switchyard/server/signal"
)

func newSource(t *testing.T, cfg signal.PrometheusConfig) *signal.Prometheus {
	t.Helper()
	p, err := signal.NewPrometheus(cfg)
	if err != nil {
		t.Fatalf("NewPrometheus(%+v): %v", cfg, err)
	}
	t.Cleanup(p.CloseIdleConnections)
	return p
}

func TestPrometheusConfig(t *testing.T) {
	good := []signal.PrometheusConfig{
		{Address: "http://127.0.0.1:9090"},
		{Address: "https://prometheus.example.com"},
		{Address: "http://prometheus:9090/"},
		{Address: "http://[::1]:9090"},
		{Address: "https://mimir.example.com/prometheus", Timeout: 10 * time.Second, BearerToken: "glc_eyJvIjoiMSJ9=="},
	}
	for _, cfg := range good {
		if err := cfg.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v, want nil", cfg, err)
		}
	}

	bad := []struct {
		cfg   signal.PrometheusConfig
		field string
		want  string
	}{
		{signal.PrometheusConfig{}, "address", "required"},
		{signal.PrometheusConfig{Address: "127.0.0.1:9090"}, "address", "http"},
		{signal.PrometheusConfig{Address: "prometheus"}, "address", "http"},
		{signal.PrometheusConfig{Address: "ftp://prometheus:21"}, "address", "scheme"},
		{signal.PrometheusConfig{Address: "http://"}, "address", "host"},
		{signal.PrometheusConfig{Address: "http://:9090"}, "address", "host"},
		{signal.PrometheusConfig{Address: "http://prometheus:99999"}, "address", "port"},
		{signal.PrometheusConfig{Address: "http://prometheus:port"}, "address", "port"},
		{signal.PrometheusConfig{Address: "http://admin:secret@prometheus:9090"}, "address", "user:password"},
		{signal.PrometheusConfig{Address: "http://prometheus:9090?x=1"}, "address", "query string"},
		{signal.PrometheusConfig{Address: "http://prometheus:9090/api/v1"}, "address", "/api/v1"},
		{signal.PrometheusConfig{Address: "http://prom etheus:9090"}, "address", "want http(s)://host[:port]"},
		{signal.PrometheusConfig{Address: "http://p:9090", Timeout: -time.Second}, "timeout", "positive"},
		{signal.PrometheusConfig{Address: "http://p:9090", BearerToken: "Bearer abc"}, "bearer_token", "without"},
		{signal.PrometheusConfig{Address: "http://p:9090", BearerToken: "abc\r\nX-Injected: 1"}, "bearer_token", "printable"},
		{signal.PrometheusConfig{Address: "http://p:9090", BearerToken: "a b"}, "bearer_token", "printable"},
	}
	for _, tc := range bad {
		_, err := signal.NewPrometheus(tc.cfg)
		var ce *signal.ConfigError
		if !errors.As(err, &ce) {
			t.Errorf("NewPrometheus(%+v) = %v, want a *ConfigError", tc.cfg, err)
			continue
		}
		if ce.Field != tc.field || !strings.Contains(ce.Error(), tc.want) || !strings.Contains(ce.Error(), tc.field) {
			t.Errorf("NewPrometheus(%+v) = %q (field %s), want field %s and %q", tc.cfg, ce, ce.Field, tc.field, tc.want)
		}
		if tc.cfg.BearerToken != "" && strings.Contains(ce.Error(), tc.cfg.BearerToken) {
			t.Errorf("the error %q repeats the token", ce)
		}
	}
}

// TestPrometheus runs the source against a real Prometheus scraping an
// exporter the test controls. The last subtest stops Prometheus.
func TestPrometheus(t *testing.T) {
	prom := promtest.Start(t)
	exp := prom.Exporter
	src := newSource(t, signal.PrometheusConfig{Address: prom.URL, Timeout: 10 * time.Second})
	ctx := context.Background()

	t.Run("query outcomes", func(t *testing.T) {
		exp.Set("checkout_error_rate", 0.3)
		exp.Set("checkout_errors", 1, "pod", "a")
		exp.Set("checkout_errors", 2, "pod", "b")
		exp.Set("checkout_nan", math.NaN())
		prom.Sync(t)
		now := time.Now()

		type outcome int
		const (
			value outcome = iota
			noData
			queryError
		)
		cases := []struct {
			name, query string
			want        outcome
			value       float64
			msg         []string // for queryError: substrings of the message
		}{
			{"one series", "checkout_error_rate", value, 0.3, nil},
			{"aggregated", "sum(checkout_errors)", value, 3, nil},
			{"max", "max(checkout_errors)", value, 2, nil},
			{"scalar", "scalar(checkout_error_rate)", value, 0.3, nil},
			{"arithmetic", "checkout_error_rate * 100", value, 30, nil},
			{"literal zero is a value", "vector(0)", value, 0, nil},
			{"filtered to nothing", "checkout_error_rate > 0.5", noData, 0, nil},
			{"matches nothing", "checkout_no_such_metric", noData, 0, nil},
			{"aggregation of nothing", "sum(checkout_no_such_metric)", noData, 0, nil},
			{"scalar of nothing is NaN", "scalar(checkout_no_such_metric)", noData, 0, nil},
			{"NaN served", "checkout_nan", noData, 0, nil},
			{"zero over zero", "0/0", noData, 0, nil},
			{"division by zero is +Inf, a value", "vector(1)/0", value, math.Inf(1), nil},
			{"several series", "checkout_errors", queryError, 0, []string{"2 series", `checkout_errors{`, `pod="a"`, "sum(...)"}},
			{"syntax error", "sum(checkout_errors", queryError, 0, []string{"1:", "parse error"}},
			{"unknown function", "no_such_function(checkout_errors)", queryError, 0, []string{"unknown function"}},
			{"range vector", "checkout_error_rate[1m]", queryError, 0, []string{"range vector"}},
			{"string", `"text"`, queryError, 0, []string{"string"}},
			{"many-to-many", "vector(1) * on() checkout_errors", queryError, 0, []string{"many-to-many"}},
			{"empty", " ", queryError, 0, []string{"empty"}},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				s, err := src.Query(ctx, tc.query, now)
				switch tc.want {
				case value:
					if err != nil || !s.OK || s.Value != tc.value {
						t.Fatalf("Query(%q) = %+v, %v; want value %v", tc.query, s, err, tc.value)
					}
				case noData:
					if err != nil || s != (signal.Sample{}) {
						t.Fatalf("Query(%q) = %+v, %v; want no data (OK false), no error", tc.query, s, err)
					}
				case queryError:
					var qe *signal.QueryError
					if !errors.As(err, &qe) || s != (signal.Sample{}) {
						t.Fatalf("Query(%q) = %+v, %v; want a *QueryError", tc.query, s, err)
					}
					if errors.Is(err, signal.ErrUnavailable) {
						t.Errorf("Query(%q): a bad query must not read as an outage: %v", tc.query, err)
					}
					for _, w := range tc.msg {
						if !strings.Contains(qe.Msg, w) {
							t.Errorf("Query(%q) message %q does not contain %q", tc.query, qe.Msg, w)
						}
					}
				}
			})
		}
	})

	t.Run("query at a time", func(t *testing.T) {
		exp.Set("checkout_latency", 0.25)
		prom.Sync(t)
		exp.Set("checkout_latency", 0.75)
		prom.Sync(t)
		samples := prom.Samples(t, "checkout_latency")
		first := samples[0]
		var firstNew promtest.Sample
		for _, s := range samples {
			if s.Value == 0.75 {
				firstNew = s
				break
			}
		}
		if first.Value != 0.25 || firstNew.At.IsZero() {
			t.Fatalf("stored samples %v, want 0.25 then 0.75", samples)
		}
		cases := []struct {
			at   time.Time
			want signal.Sample
		}{
			{first.At.Add(-time.Millisecond), signal.Sample{}}, // before the series existed
			{first.At, signal.Sample{Value: 0.25, OK: true}},
			{firstNew.At.Add(-time.Millisecond), signal.Sample{Value: 0.25, OK: true}},
			{firstNew.At, signal.Sample{Value: 0.75, OK: true}},
			{time.Now(), signal.Sample{Value: 0.75, OK: true}},
		}
		for _, tc := range cases {
			if s, err := src.Query(ctx, "checkout_latency", tc.at); err != nil || s != tc.want {
				t.Errorf("Query at %s = %+v, %v; want %+v", tc.at.Format(time.RFC3339Nano), s, err, tc.want)
			}
		}
	})

	t.Run("range", func(t *testing.T) {
		// 0.9, then 0.3, then 0.9 again: "> 0.5" has a gap in the middle.
		for _, v := range []float64{0.9, 0.3, 0.9} {
			exp.Set("checkout_saturation", v)
			prom.Sync(t)
		}
		raw := prom.Samples(t, "checkout_saturation")
		step := 100 * time.Millisecond
		start := raw[0].At.Add(-time.Second) // ten steps before the first sample
		// Scrape times drift off the step grid by a few milliseconds; one
		// step past the last sample keeps a grid point after it.
		end := raw[len(raw)-1].At.Add(step)

		cases := []struct {
			query string
			keep  func(float64) bool
		}{
			{"checkout_saturation", func(float64) bool { return true }},
			{"checkout_saturation > 0.5", func(v float64) bool { return v > 0.5 }},
		}
		for _, tc := range cases {
			// Expected: at each step, the latest stored sample at or before
			// it (all within Prometheus's 5-minute lookback), if kept.
			var want []signal.Point
			for at := start; !at.After(end); at = at.Add(step) {
				var last *promtest.Sample
				for i := range raw {
					if !raw[i].At.After(at) {
						last = &raw[i]
					}
				}
				if last != nil && tc.keep(last.Value) {
					want = append(want, signal.Point{At: at, Value: last.Value})
				}
			}
			got, err := src.Range(ctx, tc.query, start, end, step)
			if err != nil {
				t.Fatalf("Range(%q): %v", tc.query, err)
			}
			if !equalPoints(got, want) {
				t.Fatalf("Range(%q) =\n%v\nwant\n%v\n(stored samples %v)", tc.query, got, want, raw)
			}
			if len(got) == 0 || !got[0].At.Equal(raw[0].At) {
				t.Fatalf("Range(%q): the first point must be at the first sample %s", tc.query, raw[0].At)
			}
		}
		// The gap: the filtered range has fewer points than the plain one,
		// and some of them are missing in the middle.
		all, _ := src.Range(ctx, "checkout_saturation", start, end, step)
		high, _ := src.Range(ctx, "checkout_saturation > 0.5", start, end, step)
		if len(high) >= len(all) || high[len(high)-1].At != all[len(all)-1].At {
			t.Fatalf("expected a gap in the middle of %v (all: %v)", high, all)
		}

		if got, err := src.Range(ctx, "checkout_no_such_metric", start, end, step); err != nil || len(got) != 0 {
			t.Errorf("Range of nothing = %v, %v; want no points, no error", got, err)
		}
		exp.Set("checkout_queue", 1, "pod", "a")
		exp.Set("checkout_queue", 2, "pod", "b")
		prom.Sync(t)
		var qe *signal.QueryError
		now := time.Now()
		if _, err := src.Range(ctx, "checkout_queue", now.Add(-time.Second), now, time.Second); !errors.As(err, &qe) || !strings.Contains(qe.Msg, "2 series") {
			t.Errorf("Range of two series = %v, want a *QueryError saying 2 series", err)
		}
		if _, err := src.Range(ctx, "sum(", start, end, step); !errors.As(err, &qe) || !strings.Contains(qe.Msg, "parse error") {
			t.Errorf("Range of a syntax error = %v, want a *QueryError", err)
		}
		if _, err := src.Range(ctx, "checkout_saturation", start, start.Add(time.Hour), time.Millisecond); !errors.As(err, &qe) || !strings.Contains(qe.Msg, "11,000") {
			t.Errorf("Range over too many points = %v, want Prometheus's resolution limit as a *QueryError", err)
		}
		for _, bad := range []struct {
			start, end time.Time
			step       time.Duration
		}{
			{end, start, step},
			{start, end, 0},
			{start, end, -time.Second},
			{time.Time{}, end, step},
		} {
			if _, err := src.Range(ctx, "checkout_saturation", bad.start, bad.end, bad.step); err == nil || errors.Is(err, signal.ErrUnavailable) {
				t.Errorf("Range(%s, %s, %s) = %v, want an argument error", bad.start, bad.end, bad.step, err)
			}
		}
	})

	t.Run("bearer token through an auth proxy", func(t *testing.T) {
		exp.Set("checkout_auth_probe", 42)
		prom.Sync(t)
		target, _ := url.Parse(prom.URL)
		proxy := httputil.NewSingleHostReverseProxy(target)
		transport := http.DefaultTransport.(*http.Transport).Clone()
		defer transport.CloseIdleConnections()
		proxy.Transport = transport
		front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer s3cret-token" {
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			proxy.ServeHTTP(w, r)
		}))
		defer front.Close()

		good := newSource(t, signal.PrometheusConfig{Address: front.URL, BearerToken: "s3cret-token"})
		if s, err := good.Query(ctx, "checkout_auth_probe", time.Now()); err != nil || s != (signal.Sample{Value: 42, OK: true}) {
			t.Fatalf("Query with the token = %+v, %v; want 42", s, err)
		}
		for _, token := range []string{"", "wrong"} {
			bad := newSource(t, signal.PrometheusConfig{Address: front.URL, BearerToken: token})
			s, err := bad.Query(ctx, "checkout_auth_probe", time.Now())
			if !errors.Is(err, signal.ErrUnavailable) || s != (signal.Sample{}) || !strings.Contains(err.Error(), "401") {
				t.Errorf("Query with token %q = %+v, %v; want an ErrUnavailable saying 401", token, s, err)
			}
			if token != "" && strings.Contains(err.Error(), token) {
				t.Errorf("the error %q repeats the token", err)
			}
		}
	})

	t.Run("stopped mid-test", func(t *testing.T) {
		exp.Set("checkout_error_rate", 0.3)
		prom.Sync(t)
		if s, err := src.Query(ctx, "checkout_error_rate", time.Now()); err != nil || !s.OK {
			t.Fatalf("before Stop: %+v, %v", s, err)
		}
		prom.Stop()

		s, err := src.Query(ctx, "checkout_error_rate", time.Now())
		if !errors.Is(err, signal.ErrUnavailable) || s != (signal.Sample{}) {
			t.Fatalf("Query after Stop = %+v, %v; want an error wrapping ErrUnavailable (not a value, not no data)", s, err)
		}
		if !strings.Contains(err.Error(), prom.URL) {
			t.Errorf("the error %q does not say which server", err)
		}
		if pts, err := src.Range(ctx, "checkout_error_rate", time.Now().Add(-time.Minute), time.Now(), time.Second); !errors.Is(err, signal.ErrUnavailable) || pts != nil {
			t.Fatalf("Range after Stop = %v, %v; want an error wrapping ErrUnavailable", pts, err)
		}
		if err := src.Check(ctx, "sum(checkout_errors)"); err != nil {
			t.Fatalf("Check needs no server, got %v", err)
		}
	})
}

func equalPoints(a, b []signal.Point) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].At.Equal(b[i].At) || a[i].Value != b[i].Value {
			return false
		}
	}
	return true
}

// TestPrometheusHung: a server that accepts the request and never
// answers costs the caller the timeout, then an ErrUnavailable.
func TestPrometheusHung(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 8)
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case arrived <- struct{}{}:
		default:
		}
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer hung.Close()
	defer close(release)

	const timeout = 300 * time.Millisecond
	src := newSource(t, signal.PrometheusConfig{Address: hung.URL, Timeout: timeout})

	began := time.Now()
	s, err := src.Query(context.Background(), "checkout_error_rate", time.Now())
	elapsed := time.Since(began)
	if !errors.Is(err, signal.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) || s != (signal.Sample{}) {
		t.Fatalf("Query of a hung server = %+v, %v; want ErrUnavailable and DeadlineExceeded", s, err)
	}
	if !strings.Contains(err.Error(), timeout.String()) {
		t.Errorf("the error %q does not say how long it waited", err)
	}
	// The lower bound is exact; the upper one only proves it did not hang.
	if elapsed < timeout || elapsed > timeout+10*time.Second {
		t.Errorf("Query returned after %s, want about %s", elapsed, timeout)
	}
	if _, err := src.Range(context.Background(), "x", time.Now().Add(-time.Minute), time.Now(), time.Second); !errors.Is(err, signal.ErrUnavailable) {
		t.Errorf("Range of a hung server = %v, want ErrUnavailable", err)
	}

	// The caller's own cancellation is the caller's: it says nothing about
	// the server.
	for len(arrived) > 0 {
		<-arrived
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-arrived // the request is in flight
		cancel()
	}()
	_, err = src.Query(ctx, "checkout_error_rate", time.Now())
	if !errors.Is(err, context.Canceled) || errors.Is(err, signal.ErrUnavailable) {
		t.Fatalf("Query with a canceled context = %v, want context.Canceled and not ErrUnavailable", err)
	}
}

// TestPrometheusMisbehaving covers answers a real Prometheus gives only
// when something is wrong in front of or inside it.
func TestPrometheusMisbehaving(t *testing.T) {
	cases := []struct {
		name        string
		status      int
		contentType string
		body        string
		unavailable bool     // else a *QueryError
		msg         []string // substrings of the error
	}{
		{"proxy error page", 502, "text/html", "<html>Bad Gateway</html>", true, []string{"502", "text/html", "not a Prometheus API answer"}},
		{"not found", 404, "text/plain; charset=utf-8", "404 page not found", true, []string{"404"}},
		{"prometheus unavailable", 503, "application/json", `{"status":"error","errorType":"unavailable","error":"TSDB not ready"}`, true, []string{"503", "unavailable", "TSDB not ready"}},
		{"query timeout", 503, "application/json", `{"status":"error","errorType":"timeout","error":"query timed out in expression evaluation"}`, true, []string{"timeout", "timed out"}},
		{"internal", 500, "application/json", `{"status":"error","errorType":"internal","error":"storage failed"}`, true, []string{"storage failed"}},
		{"forbidden", 403, "text/plain", "forbidden", true, []string{"403", "bearer token"}},
		{"malformed JSON", 200, "application/json", `{"status":"success","data":`, true, []string{"malformed"}},
		{"unknown result type", 200, "application/json", `{"status":"success","data":{"resultType":"table","result":[]}}`, true, []string{"table"}},
		{"bad sample", 200, "application/json", `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"abc"]}]}}`, true, []string{"abc"}},
		{"native histogram", 200, "application/json", `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"histogram":[1,{"count":"3"}]}]}}`, false, []string{"histogram"}},
		{"execution", 422, "application/json", `{"status":"error","errorType":"execution","error":"query processing would load too many samples into memory"}`, false, []string{"too many samples"}},
		{"oversized", 200, "application/json", `{"status":"success","data":{"resultType":"vector","result":[` + strings.Repeat(`{"metric":{"pod":"x"},"value":[1,"1"]},`, 250000) + `]}}`, false, []string{"larger than 8 MiB", "aggregate"}},
		{"control characters in the message", 400, "application/json", `{"status":"error","errorType":"bad_data","error":"bad\u001b[31m\nquery"}`, false, []string{"bad [31m query"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tc.contentType)
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			src := newSource(t, signal.PrometheusConfig{Address: srv.URL})
			s, err := src.Query(context.Background(), "checkout_error_rate", time.Now())
			if err == nil || s != (signal.Sample{}) {
				t.Fatalf("Query = %+v, %v; want an error", s, err)
			}
			var qe *signal.QueryError
			if tc.unavailable != errors.Is(err, signal.ErrUnavailable) || tc.unavailable == errors.As(err, &qe) {
				t.Fatalf("Query = %v; want unavailable=%v", err, tc.unavailable)
			}
			for _, w := range tc.msg {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// TestPrometheusRequest: what goes over the wire.
func TestPrometheusRequest(t *testing.T) {
	type request struct {
		method, path, auth string
		form               url.Values
	}
	requests := make(chan request, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		requests <- request{r.Method, r.URL.Path, r.Header.Get("Authorization"), r.PostForm}
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/prom/api/v1/query_range" {
			_, _ = w.Write([]byte(`{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1700000000,"1"],[1700000000.5,"NaN"],[1700000001,"+Inf"],[1700000001.5,"2.5"]]}]}}`))
			return
		}
		_, _ = w.Write([]byte(`{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1700000000.123,"0.5"]}]}}`))
	}))
	defer srv.Close()
	src := newSource(t, signal.PrometheusConfig{Address: srv.URL + "/prom/", Timeout: 2500 * time.Millisecond, BearerToken: "tok"})
	at := time.UnixMilli(1700000000123)

	if s, err := src.Query(context.Background(), `sum(rate(x{a="b"}[5m]))`, at); err != nil || s != (signal.Sample{Value: 0.5, OK: true}) {
		t.Fatalf("Query = %+v, %v", s, err)
	}
	got := <-requests
	if got.method != http.MethodPost || got.path != "/prom/api/v1/query" || got.auth != "Bearer tok" ||
		got.form.Get("query") != `sum(rate(x{a="b"}[5m]))` || got.form.Get("time") != "1700000000.123" || got.form.Get("timeout") != "2.5" {
		t.Fatalf("request %+v", got)
	}

	pts, err := src.Range(context.Background(), "x", time.Unix(1700000000, 0), time.Unix(1700000002, 0), 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	want := []signal.Point{{At: time.Unix(1700000000, 0), Value: 1}, {At: time.Unix(1700000001, 0), Value: math.Inf(1)}, {At: time.UnixMilli(1700000001500), Value: 2.5}}
	if !equalPoints(pts, want) {
		t.Fatalf("Range = %v, want %v (NaN skipped, +Inf kept)", pts, want)
	}
	got = <-requests
	if got.path != "/prom/api/v1/query_range" || got.auth != "Bearer tok" ||
		got.form.Get("start") != "1700000000.000" || got.form.Get("end") != "1700000002.000" || got.form.Get("step") != "0.5" {
		t.Fatalf("range request %+v", got)
	}
	if _, err := src.Query(context.Background(), "x", time.Time{}); err == nil || errors.Is(err, signal.ErrUnavailable) {
		t.Fatalf("Query at the zero time = %v, want an argument error", err)
	}
}

// TestPrometheusRedirect: a redirect that keeps the POST is followed; one
// that would drop the query is an error that says where it points.
func TestPrometheusRedirect(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/old/api/v1/query":
			http.Redirect(w, r, "/new/api/v1/query", http.StatusFound)
		case "/moved/api/v1/query":
			http.Redirect(w, r, "/new/api/v1/query", http.StatusPermanentRedirect)
		case "/new/api/v1/query":
			if err := r.ParseForm(); err != nil || r.Method != http.MethodPost || r.PostForm.Get("query") != "x" {
				http.Error(w, "lost the query", http.StatusBadRequest)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"status":"success","data":{"resultType":"scalar","result":[1,"7"]}}`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()

	moved := newSource(t, signal.PrometheusConfig{Address: srv.URL + "/moved"})
	if s, err := moved.Query(context.Background(), "x", time.Now()); err != nil || s != (signal.Sample{Value: 7, OK: true}) {
		t.Fatalf("Query through a 308 = %+v, %v; want 7", s, err)
	}
	old := newSource(t, signal.PrometheusConfig{Address: srv.URL + "/old"})
	_, err := old.Query(context.Background(), "x", time.Now())
	if !errors.Is(err, signal.ErrUnavailable) || !strings.Contains(err.Error(), "302") || !strings.Contains(err.Error(), "/new/api/v1/query") {
		t.Fatalf("Query through a 302 = %v; want ErrUnavailable naming the redirect", err)
	}
	// The caller's client is copied, not changed.
	own := &http.Client{}
	_ = newSource(t, signal.PrometheusConfig{Address: srv.URL, HTTPClient: own})
	if own.CheckRedirect != nil {
		t.Fatal("NewPrometheus changed the caller's http.Client")
	}
}
