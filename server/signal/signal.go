// Package signal is the one interface through which leader jobs read
// metrics: auto-triggers, rollout gates and drill abort conditions ask a
// Source for the value of a query at a time, and previews ask for a range.
//
// Two sources implement it: the fleet model (server/fleet), which answers
// from the reports of SDK instances, and Prometheus over its HTTP API
// (prometheus.go). Every answer has three outcomes, never two: a value, no
// data (no series, an empty result, NaN), or an error (the source could not
// be asked). No data is not zero, and an error is not no data.
package signal

import (
	"context"
	"errors"
	"time"
)

// Sample is the value of a query at one time, or no data.
type Sample struct {
	Value float64
	// OK is false when there is no data: the query matched nothing (or
	// answered NaN). Value may be ±Inf, which JSON cannot hold: encode it
	// with care when you store it.
	OK bool
}

// Point is one value of a range.
type Point struct {
	At    time.Time
	Value float64
}

// Source answers metric queries.
type Source interface {
	// Query evaluates q at t. A query that matches nothing answers
	// Sample{OK: false}; an error means the source could not answer
	// (unreachable, timed out, refused the query).
	Query(ctx context.Context, q string, t time.Time) (Sample, error)
	// Range evaluates q at every step from start to end; times without
	// data have no point.
	Range(ctx context.Context, q string, start, end time.Time, step time.Duration) ([]Point, error)
	// Check tells whether q is a query this source can run, before it is
	// saved anywhere: a *QueryError for a bad query.
	Check(ctx context.Context, q string) error
}

// QueryError is a query the source refuses (syntax, unknown name, an
// answer of several series where one is needed); Msg says what is wrong,
// for the person who wrote it.
type QueryError struct{ Msg string }

func (e *QueryError) Error() string { return "signal: bad query: " + e.Msg }

// ErrUnavailable wraps failures to reach a source or get an answer from it
// (refused connection, timeout, error status). The caller's own
// cancellation is not one: that error wraps ctx.Err() instead.
var ErrUnavailable = errors.New("signal: source unavailable")
