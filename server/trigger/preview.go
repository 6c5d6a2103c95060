package trigger

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/switchyard-io/switchyard/internal/oneline"
	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/signal"
)

// Preview bounds.
const (
	DefaultPreviewRange = 6 * time.Hour
	maxPreviewRange     = 7 * 24 * time.Hour
	// previewPoints is how many steps a default preview's range has; a
	// Prometheus range answers at most 11,000.
	previewPoints    = 1440
	maxPreviewPoints = 11000
	maxPreviewEvents = 500
)

// PreviewInput asks how a rule would have behaved over the last Range
// (default 6h) of its source, evaluated every Step (default Range/1440,
// at least a second).
type PreviewInput struct {
	Rule  Input  `json:"rule"`
	Range string `json:"range"`
	Step  string `json:"step"`
}

// Preview is a rule evaluated over a range of history with the same
// evaluator the job runs: the series, the spans without data, and every
// decision that did something — when it would have fired and recovered.
type Preview struct {
	Start   time.Time      `json:"start"`
	End     time.Time      `json:"end"`
	Step    string         `json:"step"`
	Source  string         `json:"source"`
	Query   string         `json:"query"`
	Trigger CondView       `json:"trigger"`
	Recover CondView       `json:"recover"`
	Points  []PreviewPoint `json:"points"`
	NoData  []Span         `json:"no_data"`
	Events  []PreviewEvent `json:"events"`
	// Fired and Recovered count the flips; Transitions every decision
	// that did something (flips, proposals, locks).
	Fired       int   `json:"fired"`
	Recovered   int   `json:"recovered"`
	Transitions int   `json:"transitions"`
	Final       Phase `json:"final"`
	// SourceError says why there are no points when the source could not
	// be asked (Prometheus down): the preview is then empty, not calm.
	SourceError string `json:"source_error,omitempty"`
}

// PreviewPoint is one value of the series.
type PreviewPoint struct {
	At    time.Time `json:"at"`
	Value Num       `json:"value"`
}

// Span is a stretch of time.
type Span struct {
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
}

// PreviewEvent is a decision that would have done something.
type PreviewEvent struct {
	At     time.Time `json:"at"`
	Action Action    `json:"action"`
	From   Phase     `json:"from"`
	To     Phase     `json:"to"`
	Value  *Num      `json:"value"`
	Why    string    `json:"why"`
}

// Preview evaluates a rule (saved or not) over the recent history of its
// source: Prometheus's query_range, or the fleet model's history (6 h). It
// starts with the switch off and nobody confirming a proposed recovery.
// It writes nothing.
//
// A preview runs the rule's query through the console's metric sources
// (with the console's Prometheus credentials, up to thousands of points),
// so it takes the right to change the app, and each actor gets
// PreviewBurst previews at once and PreviewsPerMinute after that.
func (s *Service) Preview(ctx context.Context, a server.Actor, app string, in PreviewInput) (*Preview, error) {
	if !a.CanWrite(app) {
		return nil, fmt.Errorf("%w: previews run queries with the console's credentials; they need the right to change app %q", server.ErrForbidden, app)
	}
	if _, d := s.previews.Admit(a.Name); !d.OK {
		return nil, fmt.Errorf("%w: at most %d previews a minute; try again in %s", server.ErrRateLimited, PreviewsPerMinute, d.RetryAfter.Round(time.Second)+time.Second)
	}
	var v server.FieldErrors
	r, err := build(app, in.Rule, s.check(ctx, app, probe{}))
	var ve *server.ValidationError
	if errors.As(err, &ve) {
		for _, fe := range ve.Fields {
			if fe.Field != "name" && fe.Field != "switch" { // not needed to preview
				v = append(v, &server.FieldError{Field: "rule." + fe.Field, Msg: fe.Msg})
			}
		}
	}
	rng := previewDuration(&v, "range", in.Range, DefaultPreviewRange)
	if rng <= 0 || rng > maxPreviewRange {
		v.Addf("range", "must be more than 0 and at most 7d (%s)", server.ShortDuration(maxPreviewRange))
	}
	step := previewDuration(&v, "step", in.Step, max(time.Second, (rng/previewPoints).Round(time.Second)))
	switch {
	case step < time.Second:
		v.Addf("step", "must be at least 1s")
	case rng > 0 && rng/step > maxPreviewPoints:
		v.Addf("step", "gives %d points over %s; at most %d (make it at least %s)", rng/step, rng, maxPreviewPoints, (rng/maxPreviewPoints).Round(time.Second)+time.Second)
	}
	if err := v.Err(); err != nil {
		return nil, err
	}
	src, _ := s.sources.For(r.Source, app) // build checked it
	end := s.core.Now()
	start := end.Add(-rng)
	cfg := r.config()
	out := &Preview{Start: start, End: end, Step: step.String(), Source: r.Source, Query: r.Query, Trigger: cfg.Trigger, Recover: cfg.Recover,
		Points: []PreviewPoint{}, NoData: []Span{}, Events: []PreviewEvent{}}
	pts, err := src.Range(ctx, r.Query, start, end, step)
	var qe *signal.QueryError
	switch {
	case errors.As(err, &qe):
		return nil, &server.ValidationError{Fields: []*server.FieldError{{Field: "rule.query", Msg: qe.Msg}}}
	case errors.Is(err, context.Canceled):
		return nil, err
	case err != nil:
		out.SourceError = oneline.Clean(err.Error(), 500)
		out.Final = PhaseOK
		return out, nil
	}
	replayRange(r, pts, start, end, step, out)
	return out, nil
}

// replayRange replays rule r over a range's points into out. The
// evaluator's interval is the spacing of the points, not the preview's
// step: points every 30 s (the fleet's history) evaluated as if they came
// every step would start each hold shorter than 30 s over at every point,
// and never fire.
func replayRange(r *Rule, pts []signal.Point, start, end time.Time, step time.Duration, out *Preview) {
	smps, spacing := samples(pts, start, end, step)
	replay(r.Policy(spacing), smps, start, out)
}

func previewDuration(v *server.FieldErrors, field, s string, def time.Duration) time.Duration {
	if s == "" {
		return def
	}
	d, err := server.ParseDuration(s)
	if err != nil {
		v.Addf(field, `must be a duration such as "6h" or "7d", got %q`, s)
	}
	return d
}

// timed is a sample at a time.
type timed struct {
	at time.Time
	s  Sample
}

// samples turns a range's points into the samples the job would have
// seen: each point is a value, and a gap longer than twice the spacing of
// the points (at least step) is no data, one sample per spacing. It
// returns the spacing too.
func samples(pts []signal.Point, start, end time.Time, step time.Duration) ([]timed, time.Duration) {
	spacing := step
	if len(pts) > 2 {
		gaps := make([]time.Duration, 0, len(pts)-1)
		for i := 1; i < len(pts); i++ {
			gaps = append(gaps, pts[i].At.Sub(pts[i-1].At))
		}
		slices.Sort(gaps)
		spacing = max(step, gaps[len(gaps)/2])
	}
	var out []timed
	fill := func(from, to time.Time) { // no data strictly after from, before to
		if to.Sub(from) <= 2*spacing {
			return
		}
		for t := from.Add(spacing); to.Sub(t) > spacing/2; t = t.Add(spacing) {
			out = append(out, timed{t, NoData()})
		}
	}
	prev := start.Add(-spacing)
	for _, p := range pts {
		fill(prev, p.At)
		out = append(out, timed{p.At, Value(p.Value)})
		prev = p.At
	}
	fill(prev, end.Add(spacing))
	return out, spacing
}

// replay runs the evaluator over the samples into out.
func replay(p Policy, smps []timed, start time.Time, out *Preview) {
	st := Fresh(false, start)
	var gapFrom time.Time
	for _, ts := range smps {
		if ts.s.Outcome == OutcomeValue {
			out.Points = append(out.Points, PreviewPoint{At: ts.at.UTC(), Value: Num(ts.s.Value)})
			if !gapFrom.IsZero() {
				out.NoData = append(out.NoData, Span{From: gapFrom, To: ts.at.UTC()})
				gapFrom = time.Time{}
			}
		} else if gapFrom.IsZero() {
			gapFrom = ts.at.UTC()
		}
		var d Decision
		st, d = Evaluate(p, st, ts.s, ts.at)
		if d.Action == ActNone {
			continue
		}
		out.Transitions++
		switch d.Action {
		case ActTurnOn:
			out.Fired++
		case ActTurnOff:
			out.Recovered++
		}
		if len(out.Events) < maxPreviewEvents {
			out.Events = append(out.Events, PreviewEvent{At: ts.at.UTC(), Action: d.Action, From: d.From, To: d.To, Value: parseValue(valueText(ts.s)), Why: d.Why})
		}
	}
	if !gapFrom.IsZero() {
		out.NoData = append(out.NoData, Span{From: gapFrom, To: out.End.UTC()})
	}
	out.Final = st.Phase
}

// String summarises a preview in one line.
func (p *Preview) String() string {
	return fmt.Sprintf("%d fired, %d recovered, %d transitions over %s", p.Fired, p.Recovered, p.Transitions, p.End.Sub(p.Start))
}
