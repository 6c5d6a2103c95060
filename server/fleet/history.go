package fleet

import (
	"cmp"
	"slices"
	"time"

	"github.com/switchyard-io/switchyard/server/signal"
)

// Series of a switch's history.
const (
	seriesDegradedRate = iota
	seriesDegradedShare
	seriesFallbackRate
	seriesAppliedShare
)

// Series of a limit rule's history.
const (
	seriesRejectedRate = iota
	seriesAllowedRate
	seriesShadowRate
	seriesBreakersOpen
)

// sample is one point of history: up to four series at one time. NaN
// marks no data.
type sample struct {
	at int64
	v  Values
}

// ring keeps the newest samples of one switch or rule.
type ring struct {
	buf  []sample
	next int
	full bool
}

func newRing(n int) *ring { return &ring{buf: make([]sample, n)} }

// newest is the time of the newest sample (0: none).
func (r *ring) newest() int64 {
	if !r.full && r.next == 0 {
		return 0
	}
	return r.buf[(r.next+len(r.buf)-1)%len(r.buf)].at
}

func (r *ring) add(s sample) {
	r.buf[r.next] = s
	r.next = (r.next + 1) % len(r.buf)
	r.full = r.full || r.next == 0
}

// eachAfter visits the samples newer than after, newest first.
func (r *ring) eachAfter(after int64, fn func(sample)) {
	n := r.next
	if r.full {
		n = len(r.buf)
	}
	for k := 1; k <= n; k++ {
		s := r.buf[(r.next-k+len(r.buf))%len(r.buf)]
		if s.at <= after {
			return
		}
		fn(s)
	}
}

// each visits the samples oldest first.
func (r *ring) each(fn func(sample)) {
	if r.full {
		for _, s := range r.buf[r.next:] {
			fn(s)
		}
	}
	for _, s := range r.buf[:r.next] {
		fn(s)
	}
}

// Sample records one history point at now for every switch that is
// published or was ever degraded, and every rule that was ever reported,
// then forgets what no longer exists (see forget).
// Run calls it every HistoryStep; tests call it with the time they want.
func (m *Model) Sample(now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := int(m.cfg.HistoryLength / m.cfg.HistoryStep)
	at := now.Unix()
	for name, a := range m.apps {
		live := a.liveSwitches()
		for i, sw := range a.names {
			if !live[i] {
				continue
			}
			r := a.swHist[uint32(i)]
			_, published := a.effective(sw)
			v := m.switchSeries(name, sw)
			if r == nil {
				if !published && v[seriesDegradedRate] == 0 {
					continue
				}
				r = newRing(n)
				a.swHist[uint32(i)] = r
			}
			r.add(sample{at, v})
		}
		for res := range a.liveLimits() {
			r := a.limHist[res]
			if r == nil {
				r = newRing(n)
				a.limHist[res] = r
			}
			l := m.limit(name, res)
			r.add(sample{at, Values{float32(l.RejectedRate), float32(l.AllowedRate), float32(l.ShadowRate), float32(l.BreakersOpen)}})
		}
	}
	m.forget(now.Add(-m.cfg.HistoryLength).Unix())
}

// switchSeries computes a switch's history series now (callers hold m.mu).
func (m *Model) switchSeries(app, name string) Values {
	var deg, fb float64
	var live, signals, answering, applied int
	var rev int64
	if a := m.apps[app]; a != nil {
		if p, ok := a.effective(name); ok {
			rev = p.modRev
		}
	}
	m.eachInstance(app, name, func(a *appState, in *instance) {
		live++
		if in.reportAt > 0 {
			signals++
		}
		if rev > 0 && in.appliedRevision >= rev {
			applied++
		}
		if i, ok := a.index[name]; ok {
			if sig := in.switches[i]; sig != nil {
				deg += sig.degradedRate
				fb += sig.fallbackRate
				if sig.degradedRate > 0 {
					answering++
				}
			}
		}
	})
	nan := float32(nanValue)
	v := Values{nan, nan, nan, nan}
	if signals > 0 {
		v[seriesDegradedRate], v[seriesFallbackRate] = float32(deg), float32(fb)
		v[seriesDegradedShare] = float32(answering) / float32(signals)
	}
	if live > 0 && rev > 0 {
		v[seriesAppliedShare] = float32(applied) / float32(live)
	}
	return v
}

// History returns the degraded answers per second of switch app/name at
// each sampled time since since, oldest first (times without data are
// left out): the Overview's sparkline.
func (m *Model) History(app, name string, since time.Time) []signal.Point {
	return m.switchHistory(app, name, seriesDegradedRate, since, time.Time{})
}

func (m *Model) switchHistory(app, name string, series int, start, end time.Time) []signal.Point {
	m.mu.RLock()
	defer m.mu.RUnlock()
	a := m.apps[app]
	if a == nil {
		return nil
	}
	i, ok := a.index[name]
	if !ok || a.swHist[i] == nil {
		return nil
	}
	return points(a.swHist[i], series, start, end)
}

func (m *Model) limitHistory(app, resource string, series int, start, end time.Time) []signal.Point {
	m.mu.RLock()
	defer m.mu.RUnlock()
	a := m.apps[app]
	if a == nil || a.limHist[resource] == nil {
		return nil
	}
	return points(a.limHist[resource], series, start, end)
}

// points selects one series of r between start and end (zero end: no end).
func points(r *ring, series int, start, end time.Time) []signal.Point {
	var out []signal.Point
	r.each(func(s sample) {
		t := time.Unix(s.at, 0).UTC()
		if t.Before(start) || (!end.IsZero() && t.After(end)) || s.v[series] != s.v[series] {
			return
		}
		out = append(out, signal.Point{At: t, Value: float64(s.v[series])})
	})
	return out
}

// Frame is one sampling of the history: the series of every switch and
// limit rule sampled at one time. It is what the leader keeps in the
// database (store.go) so that a restarted console starts with the history.
type Frame struct {
	At       int64                        // unix seconds
	Switches map[string]map[string]Values // app → switch → series
	Limits   map[string]map[string]Values // app → resource → series
}

// Values are the series of one switch or rule at one time; NaN is no data.
type Values [4]float32

// Frames returns the samples newer than after (unix seconds) as frames,
// oldest first.
func (m *Model) Frames(after int64) []Frame {
	m.mu.RLock()
	defer m.mu.RUnlock()
	byAt := map[int64]*Frame{}
	frame := func(at int64) *Frame {
		f := byAt[at]
		if f == nil {
			f = &Frame{At: at, Switches: map[string]map[string]Values{}, Limits: map[string]map[string]Values{}}
			byAt[at] = f
		}
		return f
	}
	put := func(series map[string]map[string]Values, app, name string, v Values) {
		if series[app] == nil {
			series[app] = map[string]Values{}
		}
		series[app][name] = v
	}
	for app, a := range m.apps {
		for i, r := range a.swHist {
			r.eachAfter(after, func(s sample) { put(frame(s.at).Switches, app, a.names[i], s.v) })
		}
		for res, r := range a.limHist {
			r.eachAfter(after, func(s sample) { put(frame(s.at).Limits, app, res, s.v) })
		}
	}
	out := make([]Frame, 0, len(byAt))
	for _, f := range byAt {
		out = append(out, *f)
	}
	slices.SortFunc(out, func(a, b Frame) int { return cmp.Compare(a.At, b.At) })
	return out
}

// Restore adds frames (oldest first) to the history: a starting console's
// history as the leader kept it. A sample not newer than a series' newest
// is skipped.
func (m *Model) Restore(frames []Frame) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := int(m.cfg.HistoryLength / m.cfg.HistoryStep)
	ringOf := func(hist map[uint32]*ring, i uint32) *ring {
		if hist[i] == nil {
			hist[i] = newRing(n)
		}
		return hist[i]
	}
	for _, f := range frames {
		for app, sws := range f.Switches {
			a := m.app(app)
			for name, v := range sws {
				if r := ringOf(a.swHist, a.intern(name)); f.At > r.newest() {
					r.add(sample{f.At, v})
				}
			}
		}
		for app, lims := range f.Limits {
			a := m.app(app)
			for res, v := range lims {
				r := a.limHist[res]
				if r == nil {
					r = newRing(n)
					a.limHist[res] = r
				}
				if f.At > r.newest() {
					r.add(sample{f.At, v})
				}
			}
		}
	}
}
