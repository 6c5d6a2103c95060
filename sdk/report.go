package sdk

import (
	"cmp"
	"encoding/json"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"time"

	"github.com/switchyard-io/switchyard/sdk/limit"
	"github.com/switchyard-io/switchyard/sdk/wire"
)

// This file builds the fleet-signal reports the registry writes on the
// instance key (wire.Instance.Report) and decides when to write them (see
// reporter.due). It runs on the registry goroutine, off the hot path: it
// only loads the counters the hot path keeps (signals.go, the Limiter's).

const (
	// reportJitter spreads the periodic reports of a fleet: each is due
	// ReportInterval plus up to 20 % after the previous write, never
	// sooner, so an instance writes at most once per interval.
	reportJitter = 0.2
	// followUpGap and followUpWindow bound the one follow-up report after
	// an ack: at least followUpGap after it (so the two reports carry
	// different times, whole seconds, and the console gets a rate), at most
	// followUpWindow.
	followUpGap    = time.Second
	followUpWindow = 5 * time.Second
	// readGranularity is how far a switch's last read must advance before
	// that alone is reported again.
	readGranularity = wire.ReadGranularity
	// starvedReports is after how many written reports without it a
	// changed entry goes first, with the degraded-counter changes.
	starvedReports = 3
)

// reportReason says why the registry writes the instance key.
type reportReason uint8

const (
	reportNone     reportReason = iota
	reportRegister              // a new lease, until its first write lands
	reportAck                   // a newly applied revision
	reportFollowUp              // counters moved after an ack
	reportPeriodic              // the report interval passed and something changed
)

// reporter keeps what each switch and limit rule last reported and builds
// the next report. It belongs to the registry goroutine; tests drive it
// with their own clock.
type reporter struct {
	c        *Client
	now      func() time.Time
	interval time.Duration

	switches []switchMark          // by switch name index
	limits   map[string]*limitMark // by resource

	nextAt      time.Time         // when the next periodic report is due
	moving      bool              // the last report written had counters that moved
	follow      map[uint32]uint64 // after an ack: the changed switches' degraded+fallbacks then
	followFrom  time.Time
	followUntil time.Time

	checks atomic.Uint64 // calls of due (tests wait on it)
	skips  atomic.Uint64 // periodic reports not written: nothing changed
}

// switchMark is the reporter's view of one switch name.
type switchMark struct {
	seen   wire.SwitchSignal // at the last sample, with the last read seen
	sent   wire.SwitchSignal // as last reported
	sentAt int64             // unix seconds of the report that carried sent; 0: never
	missed int               // reports written without this entry while it had changed
}

// limitMark is the reporter's view of one limit rule.
type limitMark struct {
	l      *Limiter
	seen   wire.LimitSignal
	sent   wire.LimitSignal
	sentAt int64
	missed int
}

func newReporter(c *Client, now func() time.Time) *reporter {
	r := &reporter{c: c, now: now, interval: c.cfg.ReportInterval, limits: map[string]*limitMark{}}
	r.nextAt = r.after(now())
	return r
}

// after is when the periodic report following one at t is due.
func (r *reporter) after(t time.Time) time.Time {
	return t.Add(r.interval + rand.N(time.Duration(float64(r.interval)*reportJitter)+1))
}

// due is the report policy, the one place that decides when the instance
// key is written:
//
//   - at once when the registry must (must: a new lease, until its first
//     write lands), and when a newly applied revision is due for its ack
//     (ack: when its ack.Schedule says so, 250 ms–1.75 s after it was
//     applied unless changes keep coming); either way
//     the value carries a report;
//   - once after an ack, as soon as the degraded or fallback counters of a
//     switch that the acked changes touched have moved, between
//     followUpGap and followUpWindow after the ack: a drill sees degraded
//     counters rise within 5 s of a flip, not a whole interval later;
//   - otherwise at most once per report interval (plus a jitter of up to
//     20 %, never less), and only
//     with news: an entry changed since it was last reported, or the last
//     report had moving counters (this one, with none, tells the console
//     that their rates fell to zero). Nothing changed: no write.
func (r *reporter) due(now time.Time, must, ack bool) reportReason {
	r.checks.Add(1)
	switch {
	case must:
		return reportRegister
	case ack:
		return reportAck
	case r.follow != nil && now.After(r.followUntil):
		r.follow = nil
	case r.follow != nil && !now.Before(r.followFrom) && r.followMoved():
		return reportFollowUp
	}
	if now.Before(r.nextAt) {
		return reportNone
	}
	if r.moving || r.news(now) {
		return reportPeriodic
	}
	r.nextAt = r.after(now)
	r.skips.Add(1)
	return reportNone
}

// followMoved reports whether a switch watched since the ack has counted
// degraded answers or fallbacks since.
func (r *reporter) followMoved() bool {
	sigs := r.c.state.Load().sigs
	for i, base := range r.follow {
		if s := sigs[i]; s.degraded.Load()+s.fallbacks.Load() != base {
			return true
		}
	}
	return false
}

// sample reads every counter and read flag into the marks' seen values.
// A switch checked, or whose counters moved, since the last sample was
// last read now.
func (r *reporter) sample(now time.Time) {
	at := now.Unix()
	sigs := r.c.state.Load().sigs
	for len(r.switches) < len(sigs) {
		r.switches = append(r.switches, switchMark{})
	}
	for i, s := range sigs {
		m := &r.switches[i]
		cur := s.signal()
		cur.LastRead = m.seen.LastRead
		if s.takeRead() || cur.Degraded != m.seen.Degraded || cur.Fallbacks != m.seen.Fallbacks {
			cur.LastRead = at
		}
		m.seen = cur
	}
	if e := r.c.enforce.Load(); e != nil {
		e.limiters.Range(func(_, v any) bool {
			l := v.(*Limiter)
			m := r.limits[l.resource]
			if m == nil {
				m = &limitMark{l: l}
				r.limits[l.resource] = m
			}
			m.seen = l.signal()
			return true
		})
	}
}

// news samples and reports whether any entry changed since it was last
// reported.
func (r *reporter) news(now time.Time) bool {
	r.sample(now)
	for i := range r.switches {
		if r.switches[i].changed() {
			return true
		}
	}
	for _, m := range r.limits {
		if m.changed() {
			return true
		}
	}
	return false
}

// changed: the switch was read (or verified) and has never been reported,
// its counters moved, or its last read advanced by readGranularity.
func (m *switchMark) changed() bool {
	return (m.seen.LastRead != 0 || m.seen.Verify != nil) && (m.sentAt == 0 || m.moved() ||
		m.seen.LastRead-m.sent.LastRead >= int64(readGranularity/time.Second))
}

// moved: a counter moved, shadow verification's included.
func (m *switchMark) moved() bool {
	return m.seen.Degraded != m.sent.Degraded || m.seen.Fallbacks != m.sent.Fallbacks ||
		!slices.Equal(m.seen.Latency, m.sent.Latency) || !m.seen.Verify.Equal(m.sent.Verify)
}

// changed: the rule decided something (or its breaker left closed) and
// this was not reported yet.
func (m *limitMark) changed() bool {
	used := m.seen.Allowed+m.seen.Rejected+m.seen.ShadowRejected > 0 ||
		(m.seen.Breaker != "" && m.seen.Breaker != wire.BreakerClosed)
	return used && (m.sentAt == 0 || m.seen != m.sent)
}

func (m *limitMark) moved() bool {
	return m.seen.Allowed != m.sent.Allowed || m.seen.Rejected != m.sent.Rejected ||
		m.seen.ShadowRejected != m.sent.ShadowRejected
}

// draft is a report taken and marshaled, to be committed once written.
type draft struct {
	value    []byte
	rev      int64 // the applied revision it acks
	at       int64
	switches []uint32     // switch entries carried
	limits   []*limitMark // limit entries carried
	left     []*int       // missed counters of the changed entries left out
	moving   bool
}

// candidate is a changed entry competing for room in a report.
type candidate struct {
	urgent bool  // a degraded-counter (or rejection, breaker) change, or starved
	sentAt int64 // oldest reported first
	name   string
	limit  bool
	size   int // bytes it adds to the value
	sw     uint32
	lm     *limitMark
	missed *int
}

// take samples the counters and builds the instance value with a report
// of the entries that changed, within wire.MaxReportBytes: changes of
// degraded counters (and of limit rejections and breaker states) first,
// then the rest, each group oldest reported first; an entry left out
// starvedReports times joins the first group, so every entry gets out.
// Entries that do not fit are counted in Report.Pending.
func (r *reporter) take(now time.Time) *draft {
	r.sample(now)
	d := &draft{at: now.Unix()}
	var cands []candidate
	sigs := r.c.state.Load().sigs
	for i := range r.switches {
		m := &r.switches[i]
		if !m.changed() {
			continue
		}
		cands = append(cands, candidate{
			urgent: m.seen.Degraded != m.sent.Degraded || m.missed >= starvedReports,
			sentAt: m.sentAt, name: sigs[i].name, size: entrySize(sigs[i].name, m.seen),
			sw: uint32(i), missed: &m.missed,
		})
	}
	for res, m := range r.limits {
		if !m.changed() {
			continue
		}
		cands = append(cands, candidate{
			urgent: m.seen.Rejected != m.sent.Rejected || m.seen.ShadowRejected != m.sent.ShadowRejected ||
				m.seen.Breaker != m.sent.Breaker || m.missed >= starvedReports,
			sentAt: m.sentAt, name: res, limit: true, size: entrySize(res, m.seen),
			lm: m, missed: &m.missed,
		})
	}
	slices.SortFunc(cands, func(a, b candidate) int {
		if a.urgent != b.urgent {
			if a.urgent {
				return -1
			}
			return 1
		}
		return cmp.Or(cmp.Compare(a.sentAt, b.sentAt), cmpBool(a.limit, b.limit), cmp.Compare(a.name, b.name))
	})

	inst := r.c.instance()
	d.rev = inst.AppliedRevision
	rep := &wire.Report{At: d.at, Pending: len(cands)}
	inst.Report = rep
	base, _ := json.Marshal(inst)
	room := wire.MaxReportBytes - len(base) - len(`,"switches":{}`) - len(`,"limits":{}`)
	var fit []candidate
	for _, cd := range cands {
		if cd.size > room {
			d.left = append(d.left, cd.missed)
			continue
		}
		room -= cd.size
		fit = append(fit, cd)
	}
	for {
		rep.Pending = len(d.left)
		rep.Switches, rep.Limits = nil, nil
		d.switches, d.limits, d.moving = d.switches[:0], d.limits[:0], false
		for _, cd := range fit {
			if cd.limit {
				if rep.Limits == nil {
					rep.Limits = map[string]wire.LimitSignal{}
				}
				rep.Limits[cd.name] = cd.lm.seen
				d.limits = append(d.limits, cd.lm)
				d.moving = d.moving || cd.lm.moved()
			} else {
				if rep.Switches == nil {
					rep.Switches = map[string]wire.SwitchSignal{}
				}
				m := &r.switches[cd.sw]
				rep.Switches[cd.name] = m.seen
				d.switches = append(d.switches, cd.sw)
				d.moving = d.moving || m.moved()
			}
		}
		d.value, _ = json.Marshal(inst)
		// The sizes above are exact up to a comma per map, so this holds;
		// should it not, the last entry waits for the next report.
		if len(d.value) <= wire.MaxReportBytes || len(fit) == 0 {
			return d
		}
		d.left = append(d.left, fit[len(fit)-1].missed)
		fit = fit[:len(fit)-1]
	}
}

// commit records that d was written at now. An ack arms the follow-up for
// the switches its changes touched.
func (r *reporter) commit(d *draft, now time.Time, ack bool) {
	for _, i := range d.switches {
		m := &r.switches[i]
		m.sent, m.sentAt, m.missed = m.seen, d.at, 0
	}
	for _, m := range d.limits {
		m.sent, m.sentAt, m.missed = m.seen, d.at, 0
	}
	for _, n := range d.left {
		*n++
	}
	r.moving = d.moving
	r.nextAt = r.after(now)
	r.follow = nil
	if !ack {
		return
	}
	if touched := r.c.takeTouched(); len(touched) > 0 {
		r.follow = make(map[uint32]uint64, len(touched))
		for i := range touched {
			if int(i) < len(r.switches) {
				s := r.switches[i].seen
				r.follow[i] = s.Degraded + s.Fallbacks
			}
		}
		r.followFrom, r.followUntil = now.Add(followUpGap), now.Add(followUpWindow)
	}
}

// failed records that a report could not be written at now: its entries
// stay changed, and the next periodic try is an interval away (acks and
// registrations are retried on their own schedule).
func (r *reporter) failed(now time.Time) { r.nextAt = r.after(now) }

// entrySize is what a map entry name: v adds to a JSON object, comma
// included.
func entrySize(name string, v any) int {
	k, _ := json.Marshal(name)
	b, _ := json.Marshal(v)
	return len(k) + 1 + len(b) + 1
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// signal reads the limiter's decision counters and, for an unkeyed
// breaker rule, the breaker's state.
func (l *Limiter) signal() wire.LimitSignal {
	s := wire.LimitSignal{Allowed: l.allowed.Load()}
	for i := range l.rejected {
		s.Rejected += l.rejected[i].Load()
		s.ShadowRejected += l.wouldReject[i].Load()
	}
	if e := l.cur.Load(); e != nil {
		if b, ok := e.lim.(*limit.Breaker); ok && int(b.State()) < len(breakerStates) {
			s.Breaker = breakerStates[b.State()]
		}
	}
	return s
}

var breakerStates = [...]string{
	limit.StateClosed: wire.BreakerClosed, limit.StateOpen: wire.BreakerOpen, limit.StateHalfOpen: wire.BreakerHalfOpen,
}
