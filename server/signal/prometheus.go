package signal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard-io/switchyard/internal/oneline"
)

// DefaultPrometheusTimeout bounds a request when PrometheusConfig.Timeout
// is zero.
const DefaultPrometheusTimeout = 5 * time.Second

const (
	// maxResponseBytes bounds an answer read into memory. One series of
	// Prometheus's 11,000-point range limit is about 300 KiB; more than
	// this is a query that did not aggregate.
	maxResponseBytes = 8 << 20
	// maxQueryBytes bounds a query Check accepts.
	maxQueryBytes = 16 << 10
	// maxMessageBytes bounds a message taken from an answer.
	maxMessageBytes = 1 << 10
	// quoteBytes bounds a query or series quoted in a message.
	quoteBytes = 120
)

// PrometheusConfig says where a Prometheus HTTP API is and how to ask it.
type PrometheusConfig struct {
	// Address is the server's base URL: http(s)://host[:port], with a path
	// prefix when Prometheus is served under one (--web.route-prefix, a
	// proxy). No /api/v1, query string, fragment or user:password.
	Address string
	// Timeout bounds each request, and is sent to Prometheus as the
	// evaluation timeout. Zero means DefaultPrometheusTimeout.
	Timeout time.Duration
	// BearerToken, when set, is sent as "Authorization: Bearer <token>".
	BearerToken string
	// HTTPClient carries the requests when set (TLS roots, proxies);
	// otherwise the source has its own client.
	HTTPClient *http.Client
}

// ConfigError is a PrometheusConfig field that is not valid. Field is
// address, timeout or bearer_token.
type ConfigError struct{ Field, Msg string }

func (e *ConfigError) Error() string { return "signal: prometheus " + e.Field + ": " + e.Msg }

// Validate checks the configuration; the error is a *ConfigError naming
// the field.
func (c PrometheusConfig) Validate() error {
	if _, err := parseAddress(c.Address); err != nil {
		return err
	}
	if c.Timeout < 0 {
		return &ConfigError{Field: "timeout", Msg: fmt.Sprintf("must be positive (zero means %s), got %s", DefaultPrometheusTimeout, c.Timeout)}
	}
	if c.BearerToken != "" {
		if strings.HasPrefix(strings.ToLower(c.BearerToken), "bearer ") {
			return &ConfigError{Field: "bearer_token", Msg: `give the token alone, without "Bearer "`}
		}
		for _, r := range c.BearerToken {
			if r <= ' ' || r > '~' {
				return &ConfigError{Field: "bearer_token", Msg: "must be printable ASCII without spaces"}
			}
		}
	}
	return nil
}

func parseAddress(s string) (string, error) {
	bad := func(msg string) error {
		return &ConfigError{Field: "address", Msg: fmt.Sprintf("%s; want http(s)://host[:port], got %q", msg, s)}
	}
	if s == "" {
		return "", bad("is required")
	}
	u, err := url.Parse(s)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return "", bad(err.Error())
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return "", bad("scheme must be http or https")
	case u.Opaque != "" || u.Hostname() == "":
		return "", bad("host is missing")
	case u.User != nil:
		return "", bad("must not carry user:password (use bearer_token)")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return "", bad("must not have a query string or fragment")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return "", bad("port must be 1-65535")
		}
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	if strings.HasSuffix(u.Path, "/api/v1") {
		return "", bad("give the server's base URL, without /api/v1")
	}
	return u.String(), nil
}

// Prometheus is a Source that asks a Prometheus server over its HTTP API.
// It is safe for concurrent use.
type Prometheus struct {
	base    string // validated address, no trailing slash
	timeout time.Duration
	auth    string // Authorization header value, or ""
	client  *http.Client
}

var _ Source = (*Prometheus)(nil)

// NewPrometheus validates cfg and returns a source for it. It does not
// contact the server: an unreachable one is an error of each query.
func NewPrometheus(cfg PrometheusConfig) (*Prometheus, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	base, _ := parseAddress(cfg.Address)
	p := &Prometheus{base: base, timeout: cfg.Timeout, client: cfg.HTTPClient}
	if p.timeout == 0 {
		p.timeout = DefaultPrometheusTimeout
	}
	if cfg.BearerToken != "" {
		p.auth = "Bearer " + cfg.BearerToken
	}
	if p.client == nil {
		p.client = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	} else {
		c := *p.client
		p.client = &c
	}
	p.client.CheckRedirect = keepMethod
	return p, nil
}

// keepMethod follows only redirects that keep the POST and its body (307,
// 308). A 301/302/303 would turn the query into a GET without one, which
// Prometheus answers as a bad query; the error says where it points.
func keepMethod(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	if req.Method != via[0].Method {
		return http.ErrUseLastResponse
	}
	return nil
}

// String is the server's address, for logs (never the token).
func (p *Prometheus) String() string { return "prometheus " + p.base }

// CloseIdleConnections releases the connections kept for later requests.
func (p *Prometheus) CloseIdleConnections() { p.client.CloseIdleConnections() }

// Check parses q with Prometheus's parser; see CheckPromQL. It does not
// contact the server, so saving a rule does not depend on it being up. A
// function newer than the server passes here and fails in Query.
func (p *Prometheus) Check(_ context.Context, q string) error { return CheckPromQL(q) }

// Query evaluates q at t through /api/v1/query. The answer is a value
// when q yields one series or a scalar with a finite value; no data when
// it yields no series, NaN or ±Inf; a *QueryError when Prometheus refuses
// q or q yields several series, a range vector or a string; and an error
// wrapping ErrUnavailable when Prometheus cannot be asked (unreachable,
// no answer within the timeout, an error status). When ctx itself ends,
// the error wraps ctx.Err() instead.
func (p *Prometheus) Query(ctx context.Context, q string, t time.Time) (Sample, error) {
	if t.IsZero() {
		return Sample{}, errors.New("signal: prometheus query: the time is zero")
	}
	if strings.TrimSpace(q) == "" {
		return Sample{}, &QueryError{Msg: "the query is empty"}
	}
	form := url.Values{"query": {q}, "time": {formatTime(t)}}
	var data struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := p.call(ctx, "/api/v1/query", form, &data); err != nil {
		return Sample{}, err
	}
	switch data.ResultType {
	case "vector":
		var series []struct {
			Metric    map[string]string `json:"metric"`
			Value     *pair             `json:"value"`
			Histogram json.RawMessage   `json:"histogram"`
		}
		if err := json.Unmarshal(data.Result, &series); err != nil {
			return Sample{}, p.malformed(err)
		}
		switch {
		case len(series) == 0:
			return Sample{}, nil
		case len(series) > 1:
			metrics := make([]map[string]string, len(series))
			for i, s := range series {
				metrics[i] = s.Metric
			}
			return Sample{}, manySeries(metrics)
		case series[0].Value == nil && len(series[0].Histogram) > 0:
			return Sample{}, nativeHistogram()
		case series[0].Value == nil:
			return Sample{}, p.malformed(errors.New("a series without a value"))
		}
		return sample(series[0].Value.v), nil
	case "scalar":
		var v pair
		if err := json.Unmarshal(data.Result, &v); err != nil {
			return Sample{}, p.malformed(err)
		}
		return sample(v.v), nil
	case "matrix":
		return Sample{}, &QueryError{Msg: "the query returns a range vector (" + oneline.Cut(q, quoteBytes) + "); " +
			"wrap it in a function over time such as rate(...) or avg_over_time(...)"}
	case "string":
		return Sample{}, &QueryError{Msg: "the query returns a string; it must return a number"}
	}
	return Sample{}, p.malformed(fmt.Errorf("unknown resultType %q", data.ResultType))
}

// Range evaluates q at start, start+step, … up to end through
// /api/v1/query_range. Times without data (no series, NaN, ±Inf) have no
// point; no series at all is no points and no error. Errors are those of
// Query. Times are sent with millisecond precision, Prometheus's own.
func (p *Prometheus) Range(ctx context.Context, q string, start, end time.Time, step time.Duration) ([]Point, error) {
	switch {
	case start.IsZero() || end.IsZero():
		return nil, errors.New("signal: prometheus range: start and end must be set")
	case end.Before(start):
		return nil, fmt.Errorf("signal: prometheus range: end %s is before start %s", end.Format(time.RFC3339), start.Format(time.RFC3339))
	case step < time.Millisecond:
		return nil, fmt.Errorf("signal: prometheus range: step must be at least 1ms, got %s", step)
	case strings.TrimSpace(q) == "":
		return nil, &QueryError{Msg: "the query is empty"}
	}
	form := url.Values{
		"query": {q},
		"start": {formatTime(start)},
		"end":   {formatTime(end)},
		"step":  {strconv.FormatFloat(step.Seconds(), 'f', -1, 64)},
	}
	var data struct {
		ResultType string `json:"resultType"`
		Result     []struct {
			Metric     map[string]string `json:"metric"`
			Values     []pair            `json:"values"`
			Histograms json.RawMessage   `json:"histograms"`
		} `json:"result"`
	}
	if err := p.call(ctx, "/api/v1/query_range", form, &data); err != nil {
		return nil, err
	}
	if data.ResultType != "matrix" {
		return nil, p.malformed(fmt.Errorf("resultType %q from a range query", data.ResultType))
	}
	switch len(data.Result) {
	case 0:
		return nil, nil
	case 1:
	default:
		metrics := make([]map[string]string, len(data.Result))
		for i, s := range data.Result {
			metrics[i] = s.Metric
		}
		return nil, manySeries(metrics)
	}
	s := data.Result[0]
	if len(s.Values) == 0 && len(s.Histograms) > 0 {
		return nil, nativeHistogram()
	}
	points := make([]Point, 0, len(s.Values))
	for _, v := range s.Values {
		if math.IsNaN(v.v) {
			continue
		}
		points = append(points, Point{At: v.at, Value: v.v})
	}
	return points, nil
}

// apiResponse is the envelope of every Prometheus API answer.
type apiResponse struct {
	Status    string          `json:"status"`
	Data      json.RawMessage `json:"data"`
	ErrorType string          `json:"errorType"`
	Error     string          `json:"error"`
}

// call POSTs form to path and decodes the data of a successful answer
// into data.
func (p *Prometheus) call(ctx context.Context, path string, form url.Values, data any) error {
	reqCtx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	form.Set("timeout", strconv.FormatFloat(p.timeout.Seconds(), 'f', -1, 64))
	req, err := http.NewRequestWithContext(reqCtx, http.MethodPost, p.base+path, strings.NewReader(form.Encode()))
	if err != nil {
		return fmt.Errorf("signal: prometheus: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if p.auth != "" {
		req.Header.Set("Authorization", p.auth)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return p.failed(ctx, err)
	}
	defer resp.Body.Close()

	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		return fmt.Errorf("%w: %s refused the request (HTTP %d): check the bearer token", ErrUnavailable, p, resp.StatusCode)
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "application/json" {
		return p.notAPI(resp)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return p.failed(ctx, err)
	}
	if len(body) > maxResponseBytes {
		return &QueryError{Msg: fmt.Sprintf("the answer is larger than %d MiB; the query must aggregate to one series, e.g. sum(...) or max(...)", maxResponseBytes>>20)}
	}
	var r apiResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return fmt.Errorf("%w: %s answered HTTP %d with malformed JSON: %v", ErrUnavailable, p, resp.StatusCode, err)
	}
	if r.Status == "success" && resp.StatusCode/100 == 2 {
		if err := json.Unmarshal(r.Data, data); err != nil {
			return p.malformed(err)
		}
		return nil
	}
	switch r.ErrorType {
	case "bad_data", "execution":
		// The query is at fault: it does not parse, or cannot be evaluated
		// as written (many-to-many matching, too many samples).
		return &QueryError{Msg: oneline.Clean(strings.TrimPrefix(r.Error, `invalid parameter "query": `), maxMessageBytes)}
	}
	return fmt.Errorf("%w: %s answered HTTP %d: %s: %s", ErrUnavailable, p, resp.StatusCode, r.ErrorType, oneline.Clean(r.Error, maxMessageBytes))
}

// failed turns a transport error into the error Query returns.
func (p *Prometheus) failed(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		// The caller gave up; that says nothing about the server.
		return fmt.Errorf("signal: %s: %w", p, ctxErr)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %s did not answer within %s: %w", ErrUnavailable, p, p.timeout, context.DeadlineExceeded)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return fmt.Errorf("%w: %s: %w", ErrUnavailable, p, err)
}

// notAPI describes an answer that is not from the Prometheus API: a
// proxy's error page, a wrong address or path prefix.
func (p *Prometheus) notAPI(resp *http.Response) error {
	ct := resp.Header.Get("Content-Type")
	if ct == "" {
		ct = "no content type"
	}
	msg := fmt.Sprintf("%s answered HTTP %d (%s), not a Prometheus API answer", p, resp.StatusCode, oneline.Clean(ct, maxMessageBytes))
	if resp.StatusCode == http.StatusNotFound {
		msg += "; is the address the server's base URL, with its path prefix if it has one?"
	}
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
	if loc := resp.Header.Get("Location"); resp.StatusCode/100 == 3 && loc != "" {
		msg += "; it redirects to " + oneline.Clean(loc, quoteBytes) + ": set the address to that URL"
	} else if s := oneline.Clean(string(snippet), maxMessageBytes); s != "" {
		msg += ": " + s
	}
	return fmt.Errorf("%w: %s", ErrUnavailable, msg)
}

func (p *Prometheus) malformed(err error) error {
	return fmt.Errorf("%w: %s: unexpected answer: %v", ErrUnavailable, p, err)
}

// pair is a [unix seconds, "value"] sample of the API.
type pair struct {
	at time.Time
	v  float64
}

func (s *pair) UnmarshalJSON(b []byte) error {
	var raw [2]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	sec, err := strconv.ParseFloat(string(raw[0]), 64)
	if err != nil {
		return fmt.Errorf("sample time %s: %w", raw[0], err)
	}
	var v string
	if err := json.Unmarshal(raw[1], &v); err != nil {
		return fmt.Errorf("sample value %s: %w", raw[1], err)
	}
	if s.v, err = strconv.ParseFloat(v, 64); err != nil {
		return fmt.Errorf("sample value %q: %w", v, err)
	}
	s.at = time.UnixMilli(int64(math.Round(sec * 1000))).UTC()
	return nil
}

// sample is a value, or no data when v is NaN (0/0, scalar() of nothing).
// ±Inf is a value: histogram_quantile answers +Inf for a latency beyond the
// top bucket, exactly when a latency rule must see it.
func sample(v float64) Sample {
	if math.IsNaN(v) {
		return Sample{}
	}
	return Sample{Value: v, OK: true}
}

// formatTime is t in unix seconds with milliseconds, as Prometheus reads it.
func formatTime(t time.Time) string {
	return strconv.FormatFloat(float64(t.UnixMilli())/1000, 'f', 3, 64)
}

func manySeries(metrics []map[string]string) error {
	const shown = 3
	names := make([]string, 0, shown)
	for _, m := range metrics[:min(len(metrics), shown)] {
		names = append(names, oneline.Cut(seriesName(m), quoteBytes))
	}
	list := strings.Join(names, ", ")
	if len(metrics) > shown {
		list += ", …"
	}
	return &QueryError{Msg: fmt.Sprintf("the query returns %d series (%s); it must aggregate to one series, e.g. sum(...) or max(...)", len(metrics), list)}
}

func nativeHistogram() error {
	return &QueryError{Msg: "the query returns a native histogram; reduce it to a number, e.g. histogram_quantile(0.99, ...) or histogram_count(...)"}
}

// seriesName renders name{label="value",...}, labels sorted.
func seriesName(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		if k != "__name__" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(m["__name__"])
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k + "=" + strconv.Quote(m[k]))
	}
	b.WriteByte('}')
	return b.String()
}
