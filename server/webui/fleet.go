package webui

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/fleet"
	"github.com/switchyard-io/switchyard/server/signal"
)

// Pages read the fleet from the console's fleet model (server/fleet), fed
// by one etcd watch; no page reads etcd itself.

// fleetView is what one request shows of the fleet model.
type fleetView struct {
	m *fleet.Model
	// OutOfSync is set when the model is not in sync with etcd: what it
	// says is the last state it saw, and convergence is unknown.
	OutOfSync bool
	now       time.Time
}

// syncWait bounds how long a page waits for a model that has not listed
// etcd yet (a console that just started); a model that lost etcd later
// answers at once with what it last saw.
const syncWait = 2 * time.Second

// fleetView returns the fleet model as of this request.
func (h *handler) fleetView(c *gin.Context) *fleetView {
	synced := h.fleet.Synced()
	if !synced && h.fleet.Revision() == 0 {
		ctx, cancel := context.WithTimeout(c.Request.Context(), syncWait)
		synced = h.fleet.WaitSynced(ctx)
		cancel()
	}
	return &fleetView{m: h.fleet, OutOfSync: !synced, now: time.Now()}
}

// SwitchFleet is the fleet's view of one switch whose database row is at
// version: whether etcd holds that version, who applied it, who answers
// it degraded.
type SwitchFleet struct {
	// Known is false when the model is out of sync with etcd.
	Known bool
	// Published: etcd holds the switch at its database version.
	Published bool
	V         fleet.SwitchView
	// Spark is the sparkline of the last hour's degraded answers; nil
	// where the page shows none.
	Spark *Sparkline
	// Stale: some instance's last report is from before the switch's last
	// change, so the answering figures do not count the change yet.
	Stale bool
}

// Switch returns the fleet's view of sw; spark adds its sparkline.
func (f *fleetView) Switch(sw *server.Switch, spark bool) SwitchFleet {
	v := f.m.Summary(sw.App, sw.Name) // pages link to the instances instead
	out := SwitchFleet{Known: !f.OutOfSync, Published: v.Value != nil && v.Value.Version >= sw.Version, V: v}
	// A report's time is to the second: it counts answers up to its end.
	out.Stale = v.SignalsAt != nil && !v.SignalsAt.Add(time.Second).After(sw.UpdatedAt)
	if spark {
		s := sparkline(f.m.History(sw.App, sw.Name, f.now.Add(-sparkSpan)), f.now.Add(-sparkSpan), f.now)
		out.Spark = &s
	}
	return out
}

// LimitFleet is the fleet's view of one limit rule.
type LimitFleet struct {
	// Known is false when the model is out of sync with etcd.
	Known bool
	fleet.LimitView
}

// Limit returns the fleet's view of rule app/resource.
func (f *fleetView) Limit(app, resource string) LimitFleet {
	return LimitFleet{Known: !f.OutOfSync, LimitView: f.m.Limit(app, resource)}
}

// Turning requests away now: refused in enforce mode, or a breaker that is
// not closed somewhere (shadow rules only count what they would refuse).
func (l LimitFleet) Turning() bool {
	return l.RejectedRate > 0 || l.BreakersOpen > 0 || l.HalfOpen > 0
}

// The sparkline's size in CSS pixels and the span of history it draws.
const (
	sparkWidth  = 120
	sparkHeight = 24
	sparkSpan   = time.Hour
	// sparkPad keeps the stroke inside the box at the top and the bottom.
	sparkPad = 1
	// sparkMinPoints is how many samples make a line; fewer is
	// "collecting…" (the first minute after a console starts).
	sparkMinPoints = 2
)

// Sparkline is a small line chart of degraded answers per second, drawn
// as an inline SVG path (no script, no style attribute: app.css styles it).
type Sparkline struct {
	// Path is the SVG path data; empty when there is no line to draw,
	// and Note says why ("no data yet", "collecting…").
	Path          string
	Note          string
	Title         string
	Width, Height int
}

// sparkline draws pts between from and to: time runs left to right,
// values from zero at the bottom to their maximum at the top. A history
// younger than the span (a console that started minutes ago) is drawn
// from its first sample, not squeezed into the right edge. Where a
// sample is missing (a gap of more than twice the shortest step) the line
// breaks; a point on its own is a dot. No points is "no data yet" and
// fewer than sparkMinPoints "collecting…", never a line at zero.
func sparkline(pts []signal.Point, from, to time.Time) Sparkline {
	s := Sparkline{Width: sparkWidth, Height: sparkHeight, Title: "degraded answers/s over the last hour: "}
	switch {
	case len(pts) == 0:
		s.Note = "no data yet"
		s.Title += s.Note
		return s
	case len(pts) < sparkMinPoints:
		s.Note = "collecting…"
		s.Title = fmt.Sprintf("degraded answers/s: collecting (%d of %d samples)", len(pts), sparkMinPoints)
		return s
	}
	pts = append([]signal.Point(nil), pts...)
	slices.SortStableFunc(pts, func(a, b signal.Point) int { return a.At.Compare(b.At) })
	if first := pts[0].At; first.Sub(from) > to.Sub(from)/12 {
		from = first
		s.Title = "degraded answers/s since " + first.UTC().Format("15:04") + " UTC: "
	}
	lo, hi := math.Inf(1), 0.0
	var step time.Duration
	for i, p := range pts {
		lo, hi = min(lo, p.Value), max(hi, p.Value)
		if d := p.At.Sub(pts[max(i-1, 0)].At); d > 0 && (step == 0 || d < step) {
			step = d
		}
	}
	span := to.Sub(from).Seconds()
	x := func(t time.Time) float64 {
		return min(max(t.Sub(from).Seconds()/span, 0), 1) * sparkWidth
	}
	y := func(v float64) float64 {
		if hi == 0 {
			return sparkHeight - sparkPad
		}
		return sparkHeight - sparkPad - v/hi*(sparkHeight-2*sparkPad)
	}
	var b strings.Builder
	n := 0 // points in the segment being drawn
	for i, p := range pts {
		if i > 0 && p.At.Sub(pts[i-1].At) > 2*step {
			if n == 1 {
				b.WriteString("h0")
			}
			n = 0
		}
		cmd := "L"
		if n == 0 {
			cmd = "M"
		}
		b.WriteString(cmd + svgNum(x(p.At)) + "," + svgNum(y(p.Value)))
		n++
	}
	if n == 1 {
		b.WriteString("h0")
	}
	s.Path = b.String()
	last := pts[len(pts)-1]
	s.Title += "min " + rate(lo) + ", max " + rate(hi) + ", "
	if age := to.Sub(last.At); age > 2*time.Minute {
		s.Title += "latest " + rate(last.Value) + " (" + human(age) + " ago)"
	} else {
		s.Title += "now " + rate(last.Value)
	}
	return s
}

// svgNum writes a coordinate to a tenth.
func svgNum(f float64) string { return strconv.FormatFloat(math.Round(f*10)/10, 'f', -1, 64) }

// rate formats a per-second rate: two significant digits below 10
// ("0.25", "2.5"), whole numbers above ("124").
func rate(f float64) string {
	switch {
	case f == 0:
		return "0"
	case f < 10:
		g, _ := strconv.ParseFloat(strconv.FormatFloat(f, 'g', 2, 64), 64)
		return strconv.FormatFloat(g, 'f', -1, 64)
	}
	return strconv.FormatFloat(math.Round(f), 'f', 0, 64)
}
