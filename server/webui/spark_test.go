package webui

import (
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/server/signal"
)

// TestSparkline: history points become an SVG path over the hour, scaled
// from zero to the maximum; a history younger than the hour spans the
// width; a hole in the samples breaks the line; no points is "no data
// yet" and one "collecting…", never a flat zero line.
func TestSparkline(t *testing.T) {
	to := time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC)
	from := to.Add(-time.Hour)
	at := func(min float64, v float64) signal.Point {
		return signal.Point{At: from.Add(time.Duration(min * float64(time.Minute))), Value: v}
	}
	const prefix = "degraded answers/s over the last hour: "
	for _, tc := range []struct {
		name        string
		pts         []signal.Point
		path, title string
	}{
		{"no data", nil, "", prefix + "no data yet"},
		{"rising", []signal.Point{at(0, 0), at(30, 5), at(60, 10)}, "M0,23L60,12L120,1", prefix + "min 0, max 10, now 10"},
		{"zero is drawn at the bottom", []signal.Point{at(0, 0), at(59.5, 0), at(60, 0)}, "M0,23h0M119,23L120,23", prefix + "min 0, max 0, now 0"},
		{"a hole breaks the line", []signal.Point{at(0, 4), at(0.5, 2), at(1, 4), at(30, 1), at(30.5, 2)},
			"M0,1L1,12L2,1M60,17.5L61,12", prefix + "min 1, max 4, latest 2 (29m ago)"},
		{"a lone point after a gap is a dot", []signal.Point{at(0, 1), at(0.5, 1), at(30, 0.25)}, "M0,1L1,1M60,17.5h0", prefix + "min 0.25, max 1, latest 0.25 (30m ago)"},
		{"one sample is too few for a line", []signal.Point{at(59.5, 2)}, "", "degraded answers/s: collecting (1 of 2 samples)"},
		{"a young history fills the width", []signal.Point{at(50, 0), at(55, 5), at(60, 10)}, "M0,23L60,12L120,1", "degraded answers/s since 10:50 UTC: min 0, max 10, now 10"},
		{"out of order", []signal.Point{at(60, 10), at(0, 0), at(30, 5)}, "M0,23L60,12L120,1", prefix + "min 0, max 10, now 10"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := sparkline(tc.pts, from, to)
			if s.Path != tc.path || s.Title != tc.title {
				t.Errorf("sparkline:\n got path %q title %q\nwant path %q title %q", s.Path, s.Title, tc.path, tc.title)
			}
			if s.Width != sparkWidth || s.Height != sparkHeight {
				t.Errorf("size %dx%d", s.Width, s.Height)
			}
		})
	}
}

// TestRate: rates read as people write them.
func TestRate(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 0.004: "0.004", 0.25: "0.25", 2.54: "2.5", 10: "10", 123.6: "124", 12345.4: "12345"} {
		if got := rate(v); got != want {
			t.Errorf("rate(%v) = %q, want %q", v, got, want)
		}
	}
}
