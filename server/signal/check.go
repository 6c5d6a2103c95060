package signal

import (
	"errors"
	"strings"

	"github.com/prometheus/prometheus/promql/parser"

	"github.com/switchyard-io/switchyard/internal/oneline"
)

// promQL parses with Prometheus's own parser and its default options:
// experimental functions are refused, as a default Prometheus refuses them.
var promQL = parser.NewParser(parser.Options{})

// CheckPromQL returns a *QueryError when q is not a PromQL expression that
// evaluates to one number per time: it does not parse (the message carries
// Prometheus's text with the line:column), it is empty, or it yields a
// range vector or a string. It needs no server.
func CheckPromQL(q string) error {
	if strings.TrimSpace(q) == "" {
		return &QueryError{Msg: "the query is empty"}
	}
	if len(q) > maxQueryBytes {
		return &QueryError{Msg: "the query is longer than 16 KiB"}
	}
	expr, err := promQL.ParseExpr(q)
	if err != nil {
		var errs parser.ParseErrors
		if errors.As(err, &errs) && len(errs) > 0 {
			return &QueryError{Msg: errs[0].Error()}
		}
		return &QueryError{Msg: err.Error()}
	}
	switch expr.Type() {
	case parser.ValueTypeMatrix:
		return &QueryError{Msg: "the query returns a range vector (" + oneline.Cut(q, quoteBytes) + "); " +
			"wrap it in a function over time such as rate(...) or avg_over_time(...)"}
	case parser.ValueTypeString:
		return &QueryError{Msg: "the query returns a string; it must return a number"}
	}
	return nil
}
