package signal_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/switchyard-io/switchyard/server/signal"
)

func TestCheckPromQL(t *testing.T) {
	ok := []string{
		`checkout_error_rate`,
		`sum(rate(http_requests_total{app="checkout",code=~"5.."}[5m])) / sum(rate(http_requests_total{app="checkout"}[5m]))`,
		`histogram_quantile(0.99, sum by (le) (rate(switchyard_degraded_seconds_bucket[5m])))`,
		`max(up{job="checkout"})`,
		`1`,
		`vector(1)`,
		`scalar(checkout_error_rate)`,
		`{__name__="checkout_error_rate"}`,
	}
	for _, q := range ok {
		if err := signal.CheckPromQL(q); err != nil {
			t.Errorf("CheckPromQL(%q) = %v, want nil", q, err)
		}
	}

	bad := []struct {
		query string
		want  []string // substrings of the message
	}{
		{"", []string{"empty"}},
		{"   \n", []string{"empty"}},
		{"sum(", []string{"1:5", "parse error", "unclosed left parenthesis"}},
		{`checkout_error_rate{app="checkout"`, []string{"1:", "parse error"}},
		{"rate(x[5m]) >", []string{"1:", "parse error"}},
		{"sum(rate(x[5m])) by", []string{"parse error"}},
		{"no_such_function(x)", []string{"1:1", "unknown function"}},
		{"rate(x)", []string{"range vector"}},
		{"x\n  + on(", []string{"2:", "parse error"}}, // line:column on the second line
		{"checkout_error_rate[5m]", []string{"range vector", "avg_over_time"}},
		{`"a string"`, []string{"string"}},
		{strings.Repeat("x", 17<<10), []string{"16 KiB"}},
	}
	for _, tc := range bad {
		err := signal.CheckPromQL(tc.query)
		var qe *signal.QueryError
		if !errors.As(err, &qe) {
			t.Errorf("CheckPromQL(%.40q) = %v, want a *QueryError", tc.query, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(qe.Msg, w) {
				t.Errorf("CheckPromQL(%.40q) message %q does not contain %q", tc.query, qe.Msg, w)
			}
		}
	}
}

func TestPrometheusCheckNeedsNoServer(t *testing.T) {
	// Nothing listens on port 1: Check must not ask the server.
	p, err := signal.NewPrometheus(signal.PrometheusConfig{Address: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Check(context.Background(), "sum(rate(x[5m]))"); err != nil {
		t.Fatalf("Check of a good query = %v", err)
	}
	var qe *signal.QueryError
	if err := p.Check(context.Background(), "sum("); !errors.As(err, &qe) {
		t.Fatalf("Check of a bad query = %v, want a *QueryError", err)
	}
}
