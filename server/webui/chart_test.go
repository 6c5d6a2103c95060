package webui

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/server/trigger"
)

// TestChartAxes: a rule whose metric has ten minutes of data in a 6 h
// preview is drawn over those ten minutes; the value axis has round ticks
// and, for a rate that is never negative, starts at 0.
func TestChartAxes(t *testing.T) {
	end := time.Date(2026, 12, 4, 18, 0, 0, 0, time.UTC)
	p := &trigger.Preview{Start: end.Add(-6 * time.Hour), End: end,
		Trigger: trigger.CondView{Op: ">", Threshold: 8}, Recover: trigger.CondView{Op: "<", Threshold: 2}}
	for i, v := range []float64{0.4, 3.1, 10.0327, 7.60727, 0} {
		p.Points = append(p.Points, trigger.PreviewPoint{At: end.Add(time.Duration(i-5) * 2 * time.Minute), Value: trigger.Num(v)})
	}
	ch := drawChart(p)
	if !ch.From.Equal(p.Points[0].At) {
		t.Errorf("the chart starts at %v, want the first sample %v", ch.From, p.Points[0].At)
	}
	if first := strings.Fields(ch.Lines[0])[0]; !strings.HasPrefix(first, strconv.FormatFloat(ch.Left, 'g', -1, 64)+",") {
		t.Errorf("the first point is at %s, want the left edge %g", first, ch.Left)
	}
	var labels []string
	for _, tk := range ch.YTicks {
		labels = append(labels, tk.Label)
	}
	if want := []string{"0", "2.5", "5", "7.5", "10", "12.5"}; !slices.Equal(labels, want) {
		t.Errorf("y ticks %q, want %q", labels, want)
	}
	if ch.YTicks[0].At != ch.Bottom {
		t.Errorf("0 is at y=%g, want the bottom %g", ch.YTicks[0].At, ch.Bottom)
	}
	// Ten minutes from 17:50: a tick every 2 minutes, on the minute.
	var times []string
	for _, tk := range ch.XTicks {
		times = append(times, tk.Label)
	}
	if want := []string{"17:50", "17:52", "17:54", "17:56", "17:58", "18:00"}; !slices.Equal(times, want) {
		t.Errorf("x ticks %q, want %q", times, want)
	}

	// A metric that goes negative keeps its negative range; a series that
	// covers the range starts the chart at the range's start.
	p.Points = []trigger.PreviewPoint{{At: p.Start, Value: -0.03}, {At: end, Value: 0.05}}
	ch = drawChart(p)
	if !ch.From.IsZero() || ch.YTicks[0].Label[0] != '-' {
		t.Errorf("from %v, lowest tick %q: want the range's start and a negative tick", ch.From, ch.YTicks[0].Label)
	}
	for _, tc := range []struct {
		raw, step float64
		v         float64
		label     string
	}{{0.9, 1, 3, "3"}, {2.3, 2.5, 7.5, "7.5"}, {0.011, 0.02, 0.04, "0.04"}, {420, 500, 1500, "1500"}, {0.0004, 0.0005, -0.001, "-0.001"}} {
		if got := niceStep(tc.raw); got != tc.step {
			t.Errorf("niceStep(%g) = %g, want %g", tc.raw, got, tc.step)
		}
		if got := tickLabel(tc.v, tc.step); got != tc.label {
			t.Errorf("tickLabel(%g, %g) = %q, want %q", tc.v, tc.step, got, tc.label)
		}
	}
}
