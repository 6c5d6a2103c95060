package signal

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"
)

// This file is the metric-condition seam every job shares: the operators,
// the number type that keeps ±Inf in JSON, the
// three outcomes of one measurement, the policy for measurements without
// a value, and one timeout and parallelism for asking the sources.
// Auto-triggers, rollout gates and drill aborts all measure through it.

// Op compares a value with a threshold.
type Op string

// Operators.
const (
	Above    Op = ">"
	AtLeast  Op = ">="
	Below    Op = "<"
	AtMost   Op = "<="
	Equal    Op = "=="
	NotEqual Op = "!="
)

// Ordered are the operators of a threshold on one side: triggers and
// drill aborts take these.
var Ordered = []Op{Above, AtLeast, Below, AtMost}

// Ops are every operator: rollout gates take these.
var Ops = []Op{Above, AtLeast, Below, AtMost, Equal, NotEqual}

// Ordered reports whether o is one of Ordered.
func (o Op) Ordered() bool { return o == Above || o == AtLeast || o == Below || o == AtMost }

// Valid reports whether o is one of Ops.
func (o Op) Valid() bool { return o.Ordered() || o == Equal || o == NotEqual }

// Upward reports whether o holds for large values (> or >=).
func (o Op) Upward() bool { return o == Above || o == AtLeast }

// Holds reports whether "v o threshold" is true.
func (o Op) Holds(v, threshold float64) bool {
	switch o {
	case Above:
		return v > threshold
	case AtLeast:
		return v >= threshold
	case Below:
		return v < threshold
	case AtMost:
		return v <= threshold
	case Equal:
		return v == threshold
	case NotEqual:
		return v != threshold
	}
	return false
}

// Outcome is what one measurement gave: a value, no data, or an error.
// No data is not zero and an error is not no data.
type Outcome string

// Outcomes.
const (
	OutcomeValue  Outcome = "value"
	OutcomeNoData Outcome = "no_data"
	OutcomeError  Outcome = "error"
)

// Measurement is one query's answer at one time.
type Measurement struct {
	Outcome Outcome
	Value   float64 // with OutcomeValue; may be ±Inf
	Err     string  // with OutcomeError: what the source said
}

// Treatments: what a measurement without a value counts as, for no data
// (on_no_data) and for errors (on_error), in rules, gates and drill
// aborts alike.
const (
	// Hold decides nothing: a trigger keeps its state, a gate pauses its
	// plan, a drill goes on without counting it.
	Hold = "hold"
	// Breaching counts as the bad side: a trigger's threshold crossed, a
	// gate's condition failed, a drill's abort condition met.
	Breaching = "breaching"
	// NotBreaching counts as healthy.
	NotBreaching = "not_breaching"
)

// Treatments lists them.
var Treatments = []string{Hold, Breaching, NotBreaching}

// CheckTreatment says what is wrong with a treatment; nil when valid.
func CheckTreatment(t string) error {
	switch t {
	case Hold, Breaching, NotBreaching:
		return nil
	}
	return fmt.Errorf(`must be %q, %q or %q`, Hold, Breaching, NotBreaching)
}

// Treatment returns how m counts under onNoData and onError: "" for a
// value, else the treatment of its outcome.
func (m Measurement) Treatment(onNoData, onError string) string {
	switch m.Outcome {
	case OutcomeNoData:
		return onNoData
	case OutcomeError:
		return onError
	}
	return ""
}

// The policy for asking sources, the same for every job.
const (
	// QueryTimeout bounds one query: a source that does not answer in
	// time gives an error, so a black-holed Prometheus delays a job's
	// step by at most one timeout.
	QueryTimeout = 5 * time.Second
	// Parallel bounds the queries of one job step in flight at once.
	Parallel = 8
)

// Measure asks src for q at t within QueryTimeout.
func Measure(ctx context.Context, src Source, q string, t time.Time) Measurement {
	qctx, cancel := context.WithTimeout(ctx, QueryTimeout)
	defer cancel()
	s, err := src.Query(qctx, q, t)
	switch {
	case err != nil:
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			err = fmt.Errorf("%w: no answer within %s", ErrUnavailable, QueryTimeout)
		}
		return Measurement{Outcome: OutcomeError, Err: err.Error()}
	case !s.OK:
		return Measurement{Outcome: OutcomeNoData}
	}
	return Measurement{Outcome: OutcomeValue, Value: s.Value}
}

// Query names one query of a job: its source, the app the source answers
// for, and the query text.
type Query struct {
	Source, App, Query string
}

// MeasureAll measures every query at t concurrently, at most Parallel at
// once, each within QueryTimeout; a source that is not available is an
// error outcome of its queries.
func (s Sources) MeasureAll(ctx context.Context, qs []Query, t time.Time) []Measurement {
	out := make([]Measurement, len(qs))
	sem := make(chan struct{}, Parallel)
	var wg sync.WaitGroup
	for i, q := range qs {
		src, err := s.For(q.Source, q.App)
		if err != nil {
			out[i] = Measurement{Outcome: OutcomeError, Err: err.Error()}
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			out[i] = Measure(ctx, src, q.Query, t)
		}()
	}
	wg.Wait()
	return out
}

// TryQuery runs q once at t, as a save does before storing it: a
// *QueryError when the source refuses it (several series, say); a
// warning for the person when it has no data now or the source cannot be
// asked (neither stops the save).
func TryQuery(ctx context.Context, src Source, q string, t time.Time) (warning string, err error) {
	qctx, cancel := context.WithTimeout(ctx, QueryTimeout)
	defer cancel()
	s, err := src.Query(qctx, q, t)
	var qe *QueryError
	switch {
	case errors.As(err, &qe):
		return "", err
	case err != nil:
		return "the query could not be run now (" + err.Error() + "); it is saved unchecked", nil
	case !s.OK:
		return "the query has no data now; it counts as on_no_data says until it has", nil
	}
	return "", nil
}

// Num is a number that may be ±Inf (a Prometheus latency beyond the top
// bucket): JSON cannot hold those, so they encode as the strings "+Inf"
// and "-Inf".
type Num float64

func (n Num) String() string { return FormatNum(float64(n)) }

// MarshalJSON writes finite numbers as numbers and ±Inf as strings.
func (n Num) MarshalJSON() ([]byte, error) {
	f := float64(n)
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return []byte(strconv.Quote(FormatNum(f))), nil
	}
	return []byte(strconv.FormatFloat(f, 'g', -1, 64)), nil
}

// UnmarshalJSON reads what MarshalJSON writes.
func (n *Num) UnmarshalJSON(b []byte) error {
	s := string(b)
	if uq, err := strconv.Unquote(s); err == nil {
		s = uq
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return fmt.Errorf("signal: number %s: %w", b, err)
	}
	*n = Num(f)
	return nil
}

// FormatNum prints a value compactly: 80, 0.25, 1.5e+06, +Inf.
func FormatNum(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	}
	return strconv.FormatFloat(f, 'g', 6, 64)
}
