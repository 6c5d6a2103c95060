package fleet

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/switchyard-io/switchyard/sdk/wire"
	"github.com/switchyard-io/switchyard/server/signal"
)

var nanValue = math.NaN()

// The fleet source's query vocabulary: a metric and its labels, written as
// in PromQL, metric{label="value",...}. The app label defaults to the app
// the source was made for.
//
//	degraded_rate{switch="recommend"}        degraded answers per second, all instances
//	degraded_share{switch="recommend"}       share (0–1) of reporting instances answering degraded
//	fallback_rate{switch="recommend"}        L1 fallback values served per second
//	applied_share{switch="recommend"}        share of live instances that applied the switch's current value
//	degraded_p99_seconds{switch="recommend"} p99 latency of degraded requests served by the SDK middleware
//	verify_match_share{switch="recommend"}   share (0–1) of shadow-verification samples whose fallback matched the live answer's shape
//	rejected_rate{limit="POST /orders"}      requests refused per second (enforce mode)
//	shadow_rejected_rate{limit="…"}          requests a shadow rule would refuse, per second
//	allowed_rate{limit="…"}                  requests allowed per second
//	rejected_share{limit="…"}                refused / (allowed + refused)
//	breakers_open{limit="…"}                 instances whose breaker for the rule is open
//	instances{}                              live instances of the app
//
// No data (not zero) when the app has no instance reporting signals, when
// a share has no denominator, or a p99 no request.
var metrics = map[string]string{ // metric → the label naming its subject
	"degraded_rate": "switch", "degraded_share": "switch", "fallback_rate": "switch",
	"applied_share": "switch", "degraded_p99_seconds": "switch", "verify_match_share": "switch",
	"rejected_rate": "limit", "shadow_rejected_rate": "limit", "allowed_rate": "limit",
	"rejected_share": "limit", "breakers_open": "limit",
	"instances": "",
}

// Metrics lists the fleet source's metric names, sorted.
func Metrics() []string {
	out := make([]string, 0, len(metrics))
	for name := range metrics {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// query is a parsed fleet query.
type query struct {
	metric, app, subject string
}

var (
	queryPattern = regexp.MustCompile(`^\s*([a-z_][a-z0-9_]*)\s*(?:\{(.*)\})?\s*$`)
	labelPattern = regexp.MustCompile(`^\s*([a-z_]+)\s*=\s*"((?:[^"\\]|\\.)*)"\s*$`)
)

// QueryApp is the app whose signals fleet query q of a rule of app reads
// (its app label, app by default); "" when q does not parse.
func QueryApp(q, app string) string {
	pq, err := parseQuery(q, app)
	if err != nil {
		return ""
	}
	return pq.app
}

// parseQuery parses q; app is the default of the app label.
func parseQuery(q, app string) (query, error) {
	m := queryPattern.FindStringSubmatch(q)
	if m == nil {
		return query{}, &signal.QueryError{Msg: fmt.Sprintf("%q is not metric{label=\"value\",…}", q)}
	}
	out := query{metric: m[1], app: app}
	subject, known := metrics[out.metric]
	if !known {
		return query{}, &signal.QueryError{Msg: fmt.Sprintf("unknown fleet metric %q; known: %s", out.metric, strings.Join(Metrics(), ", "))}
	}
	if strings.TrimSpace(m[2]) != "" {
		for _, part := range splitLabels(m[2]) {
			lm := labelPattern.FindStringSubmatch(part)
			if lm == nil {
				return query{}, &signal.QueryError{Msg: fmt.Sprintf("label %q is not name=\"value\"", strings.TrimSpace(part))}
			}
			val := strings.ReplaceAll(strings.ReplaceAll(lm[2], `\"`, `"`), `\\`, `\`)
			switch {
			case lm[1] == "app":
				out.app = val
			case lm[1] == subject && subject != "":
				out.subject = val
			default:
				return query{}, &signal.QueryError{Msg: fmt.Sprintf("%s takes no label %q", out.metric, lm[1])}
			}
		}
	}
	if !wire.ValidApp(out.app) {
		return query{}, &signal.QueryError{Msg: fmt.Sprintf("app %q is not a valid app name", out.app)}
	}
	if subject != "" && out.subject == "" {
		return query{}, &signal.QueryError{Msg: fmt.Sprintf(`%s needs a %s label, e.g. %s{%s="name"}`, out.metric, subject, out.metric, subject)}
	}
	return out, nil
}

// splitLabels splits a label list at commas outside quotes.
func splitLabels(s string) []string {
	var out []string
	inQuote, escaped, start := false, false, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case escaped:
			escaped = false
		case c == '\\':
			escaped = true
		case c == '"':
			inQuote = !inQuote
		case c == ',' && !inQuote:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	if tail := strings.TrimSpace(s[start:]); tail != "" {
		out = append(out, s[start:])
	}
	return out
}

// Source returns the model as a signal.Source whose queries are about app
// unless they name another.
func (m *Model) Source(app string) signal.Source { return &source{m: m, app: app} }

type source struct {
	m   *Model
	app string
}

// live is how far from now a Query may be and still be answered from the
// current state rather than the history.
const live = time.Minute

func (s *source) Check(_ context.Context, q string) error {
	_, err := parseQuery(q, s.app)
	return err
}

func (s *source) Query(_ context.Context, q string, t time.Time) (signal.Sample, error) {
	pq, err := parseQuery(q, s.app)
	if err != nil {
		return signal.Sample{}, err
	}
	if !s.m.Synced() {
		return signal.Sample{}, fmt.Errorf("%w: the fleet model is not in sync with etcd", signal.ErrUnavailable)
	}
	if now := s.m.cfg.Now(); t.Before(now.Add(-live)) {
		// A time in the past is answered from the history.
		pts, err := s.Range(context.Background(), q, t.Add(-s.m.cfg.HistoryStep), t, s.m.cfg.HistoryStep)
		if err != nil || len(pts) == 0 {
			return signal.Sample{}, err
		}
		return signal.Sample{Value: pts[len(pts)-1].Value, OK: true}, nil
	}
	v := s.m.value(pq)
	if math.IsNaN(v) {
		return signal.Sample{}, nil
	}
	return signal.Sample{Value: v, OK: true}, nil
}

func (s *source) Range(_ context.Context, q string, start, end time.Time, _ time.Duration) ([]signal.Point, error) {
	pq, err := parseQuery(q, s.app)
	if err != nil {
		return nil, err
	}
	series := map[string]int{
		"degraded_rate": seriesDegradedRate, "degraded_share": seriesDegradedShare,
		"fallback_rate": seriesFallbackRate, "applied_share": seriesAppliedShare,
		"rejected_rate": seriesRejectedRate, "allowed_rate": seriesAllowedRate,
		"shadow_rejected_rate": seriesShadowRate, "breakers_open": seriesBreakersOpen,
	}
	i, ok := series[pq.metric]
	if !ok {
		return nil, &signal.QueryError{Msg: fmt.Sprintf("%s has no history; history is kept for %s", pq.metric, historyMetrics(series))}
	}
	if metrics[pq.metric] == "switch" {
		return s.m.switchHistory(pq.app, pq.subject, i, start, end), nil
	}
	return s.m.limitHistory(pq.app, pq.subject, i, start, end), nil
}

func historyMetrics(series map[string]int) string {
	var names []string
	for n := range series {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// value answers a parsed query from the current state; NaN is no data.
func (m *Model) value(q query) float64 {
	switch metrics[q.metric] {
	case "switch":
		v := m.Summary(q.app, q.subject) // aggregates only: a rule asks every few seconds
		switch q.metric {
		case "applied_share":
			if v.Live == 0 || v.Value == nil {
				return nanValue
			}
			return float64(v.Applied) / float64(v.Live)
		case "degraded_p99_seconds":
			if v.DegradedP99 == nil {
				return nanValue
			}
			return v.DegradedP99.Seconds()
		case "verify_match_share":
			if share, ok := v.Verification.MatchShare(); ok {
				return share
			}
			return nanValue
		}
		if v.Signals == 0 {
			return nanValue
		}
		switch q.metric {
		case "degraded_rate":
			return v.DegradedRate
		case "fallback_rate":
			return v.FallbackRate
		default: // degraded_share
			return float64(v.AnsweringDegraded) / float64(v.Signals)
		}
	case "limit":
		l := m.Limit(q.app, q.subject)
		if l.Instances == 0 {
			return nanValue
		}
		switch q.metric {
		case "rejected_rate":
			return l.RejectedRate
		case "shadow_rejected_rate":
			return l.ShadowRate
		case "allowed_rate":
			return l.AllowedRate
		case "breakers_open":
			return float64(l.BreakersOpen)
		default: // rejected_share
			if total := l.AllowedRate + l.RejectedRate; total > 0 {
				return l.RejectedRate / total
			}
			return nanValue
		}
	}
	_, total := m.AppliedBy(q.app, 0, nil)
	return float64(total)
}
