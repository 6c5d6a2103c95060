// Package fleet is each console's read model of the SDK instances of its
// namespace: what they applied and what they report (degraded answers,
// fallbacks served, last reads, limiter decisions, breaker states,
// degraded-path latency). One etcd watch on the namespace feeds it
// (feed.go); the API, the web UI and the leader jobs ask it the fleet's
// questions — who applied revision R, who answers switch X degraded and
// how often, when X was last read — instead of reading etcd per request.
//
// It only reads etcd; the one thing it writes is its sampled history, which
// the leader keeps in the database (store.go) so that a starting console
// has it. It never imports the SDK core: the instance reports and the
// rollout hash are the sdk/wire contract.
package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchyard-io/switchyard/sdk/wire"
)

// Config configures a Model.
type Config struct {
	Namespace string
	// HistoryStep is how often the per-switch and per-rule history is
	// sampled (default 30s); HistoryLength is how much of it is kept
	// (default 6h).
	HistoryStep   time.Duration
	HistoryLength time.Duration
	// Now is the clock (default time.Now).
	Now    func() time.Time
	Logger *slog.Logger
}

func (c *Config) defaults() {
	if c.HistoryStep <= 0 {
		c.HistoryStep = 30 * time.Second
	}
	if c.HistoryLength <= 0 {
		c.HistoryLength = 6 * time.Hour
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Model is the fleet read model. Its methods are safe for concurrent use.
type Model struct {
	cfg Config

	mu   sync.RWMutex
	apps map[string]*appState
	// rev is the etcd revision the model reflects.
	rev int64

	watching  atomic.Bool // the feed is listed and watching
	reachable atomic.Bool // etcd answered the last probe
	reports   atomic.Uint64
	malformed atomic.Uint64
	dirty     atomic.Bool // something changed since the last notice
	// applyNanos is the time spent applying listings and watch events.
	applyNanos atomic.Int64

	subMu sync.Mutex
	subs  map[chan struct{}]struct{}
}

// New returns an empty model; Run feeds it from etcd.
func New(cfg Config) *Model {
	cfg.defaults()
	return &Model{cfg: cfg, apps: map[string]*appState{}, subs: map[chan struct{}]struct{}{}}
}

// appState is everything known about one app.
type appState struct {
	name      string
	instances map[string]*instance
	switches  map[string]published // switches/<app>/<name>
	overrides map[string]published // overrides/<app>/<name>
	// index interns switch names: an instance keeps per-switch data in
	// slices indexed by it, which costs far less than a map per instance.
	index map[string]uint32
	names []string
	// history of switches (by index) and limit rules (by resource).
	swHist  map[uint32]*ring
	limHist map[string]*ring
}

// published is a switch value in etcd and the revision that wrote it.
type published struct {
	sw     *wire.Switch
	modRev int64
}

func (a *appState) intern(name string) uint32 {
	if i, ok := a.index[name]; ok {
		return i
	}
	i := uint32(len(a.names))
	a.index[name] = i
	a.names = append(a.names, name)
	return i
}

// effective is the switch value instances of the app apply: the drill
// override while it exists, else the switch.
func (a *appState) effective(name string) (published, bool) {
	if p, ok := a.overrides[name]; ok {
		return p, true
	}
	p, ok := a.switches[name]
	return p, ok
}

// instance is one SDK instance as last reported.
type instance struct {
	id              string
	labels          map[string]string
	sdkVersion      string
	appliedRevision int64
	appliedAt       time.Time
	startedAt       time.Time
	interval        time.Duration
	reportAt        int64 // unix seconds of the last report; 0: none (older SDK)
	modRev          int64
	// malformed says why the instance's last value did not parse; the
	// previous good state is kept.
	malformed string

	reads    []uint32 // last read (unix seconds) by switch index
	switches map[uint32]*switchSig
	limits   map[string]*limitSig
	// verify is the latest shadow verification of switches (by index)
	// whose fallback the instance verifies; nil until one reports any.
	verify map[uint32]*wire.VerifySignal
}

// switchSig is one switch's counters at one instance, with the rates
// between its last two reports.
type switchSig struct {
	degraded, fallbacks uint64
	latency, prevLat    []uint64
	at                  int64 // report time of the counters
	degradedRate        float64
	fallbackRate        float64
}

// limitSig is one limit rule's counters at one instance.
type limitSig struct {
	allowed, rejected, shadow         uint64
	at                                int64
	allowedRate, rejectedRate, shRate float64
	breaker                           string
}

func (m *Model) app(name string) *appState {
	a := m.apps[name]
	if a == nil {
		a = &appState{
			name: name, instances: map[string]*instance{}, switches: map[string]published{},
			overrides: map[string]published{}, index: map[string]uint32{},
			swHist: map[uint32]*ring{}, limHist: map[string]*ring{},
		}
		m.apps[name] = a
	}
	return a
}

// putInstance applies the value of instances/<app>/<id>. A value that does
// not parse is counted and leaves the instance's previous state.
func (m *Model) putInstance(app, id string, value []byte, modRev int64) {
	m.reports.Add(1)
	a := m.app(app)
	in := a.instances[id]
	if in == nil {
		in = &instance{id: id, switches: map[uint32]*switchSig{}, limits: map[string]*limitSig{}}
		a.instances[id] = in
	}
	in.modRev = modRev
	var v wire.Instance
	if err := json.Unmarshal(value, &v); err != nil {
		m.malformed.Add(1)
		in.malformed = fmt.Sprintf("value does not parse: %v", err)
		m.cfg.Logger.Debug("fleet: malformed instance report", "app", app, "instance", id, "err", err)
		return
	}
	in.malformed = ""
	in.labels, in.sdkVersion = v.Labels, v.SDKVersion
	in.appliedRevision, in.appliedAt, in.startedAt = v.AppliedRevision, v.AppliedAt, v.StartedAt
	in.interval = v.ReportInterval.D()
	if r := v.Report; r != nil && r.At >= in.reportAt {
		m.mergeReport(a, in, r)
	}
}

// mergeReport folds a report into an instance. A report holds only what
// changed; an absent entry kept its counters, so its rate since the last
// report is zero — unless Pending says changes were left out.
func (m *Model) mergeReport(a *appState, in *instance, r *wire.Report) {
	fresh := in.reportAt == 0 // first report this model sees of the instance
	seen := make(map[uint32]bool, len(r.Switches))
	for name, s := range r.Switches {
		i := a.intern(name)
		seen[i] = true
		if s.LastRead > 0 {
			in.setRead(i, s.LastRead)
		}
		if s.Verify != nil {
			if in.verify == nil {
				in.verify = map[uint32]*wire.VerifySignal{}
			}
			in.verify[i] = s.Verify
		}
		sig := in.switches[i]
		if sig == nil {
			if s.Degraded == 0 && s.Fallbacks == 0 && len(s.Latency) == 0 {
				continue
			}
			sig = &switchSig{at: in.baseline(fresh, r.At)}
			if sig.at == r.At {
				sig.degraded, sig.fallbacks = s.Degraded, s.Fallbacks
			}
			in.switches[i] = sig
		}
		sig.update(s, r.At)
	}
	if r.Pending == 0 {
		for i, sig := range in.switches {
			if !seen[i] {
				sig.degradedRate, sig.fallbackRate, sig.at = 0, 0, r.At
				sig.prevLat = sig.latency
			}
		}
	}
	seenLim := make(map[string]bool, len(r.Limits))
	for res, l := range r.Limits {
		seenLim[res] = true
		sig := in.limits[res]
		if sig == nil {
			sig = &limitSig{at: in.baseline(fresh, r.At)}
			if sig.at == r.At {
				sig.allowed, sig.rejected, sig.shadow = l.Allowed, l.Rejected, l.ShadowRejected
			}
			in.limits[res] = sig
		}
		sig.update(l, r.At)
	}
	if r.Pending == 0 {
		for res, sig := range in.limits {
			if !seenLim[res] {
				sig.allowedRate, sig.rejectedRate, sig.shRate, sig.at = 0, 0, 0, r.At
			}
		}
	}
	in.reportAt = r.At
}

// baseline is when the counters of an entry seen for the first time were
// zero, for its first rate: the previous report, which did not list it;
// for the first report this model sees, the instance's start if that was
// recent, else unknown — then the baseline is this report itself (at), with
// its counters, and the first rate comes with the next report.
func (in *instance) baseline(fresh bool, at int64) int64 {
	if !fresh {
		return in.reportAt
	}
	iv := max(in.interval, 10*time.Second)
	if start := in.startedAt.Unix(); start >= at-int64(2*iv/time.Second) && start < at {
		return start
	}
	return at
}

func (in *instance) setRead(i uint32, at int64) {
	for int(i) >= len(in.reads) {
		in.reads = append(in.reads, 0)
	}
	if u := uint32(at); u > in.reads[i] {
		in.reads[i] = u
	}
}

func (in *instance) lastRead(i uint32) int64 {
	if int(i) < len(in.reads) {
		return int64(in.reads[i])
	}
	return 0
}

// rate is the per-second increase from (old, oldAt) to (cur, at); a counter
// that went backwards (the process restarted under the same id) restarts
// the baseline.
func rate(old, cur uint64, oldAt, at int64) float64 {
	if at <= oldAt || cur < old {
		return 0
	}
	return float64(cur-old) / float64(at-oldAt)
}

func (s *switchSig) update(n wire.SwitchSignal, at int64) {
	if at <= s.at {
		s.degraded, s.fallbacks, s.latency = max(s.degraded, n.Degraded), max(s.fallbacks, n.Fallbacks), n.Latency
		return
	}
	s.degradedRate = rate(s.degraded, n.Degraded, s.at, at)
	s.fallbackRate = rate(s.fallbacks, n.Fallbacks, s.at, at)
	s.prevLat, s.latency = s.latency, n.Latency
	s.degraded, s.fallbacks, s.at = n.Degraded, n.Fallbacks, at
}

func (s *limitSig) update(n wire.LimitSignal, at int64) {
	s.breaker = n.Breaker
	if at <= s.at {
		return
	}
	s.allowedRate = rate(s.allowed, n.Allowed, s.at, at)
	s.rejectedRate = rate(s.rejected, n.Rejected, s.at, at)
	s.shRate = rate(s.shadow, n.ShadowRejected, s.at, at)
	s.allowed, s.rejected, s.shadow, s.at = n.Allowed, n.Rejected, n.ShadowRejected, at
}

// deleteInstance forgets an instance whose key vanished (its lease ended).
func (m *Model) deleteInstance(app, id string) {
	if a := m.apps[app]; a != nil {
		delete(a.instances, id)
	}
}

// putSwitch applies a switches/ or overrides/ value; one that does not
// parse is ignored (the reconciler repairs it).
func (m *Model) putSwitch(kind, app, name string, value []byte, modRev int64) {
	sw, err := wire.DecodeSwitch(value)
	if err != nil {
		m.cfg.Logger.Debug("fleet: unreadable switch value", "app", app, "name", name, "err", err)
		return
	}
	a := m.app(app)
	a.intern(name)
	m.switchMap(a, kind)[name] = published{sw: sw, modRev: modRev}
}

func (m *Model) deleteSwitch(kind, app, name string) {
	if a := m.apps[app]; a != nil {
		delete(m.switchMap(a, kind), name)
	}
}

func (m *Model) switchMap(a *appState, kind string) map[string]published {
	if kind == wire.KindOverrides {
		return a.overrides
	}
	return a.switches
}

// Reports returns how many instance values the model has read, and how
// many of them did not parse.
func (m *Model) Reports() (read, malformed uint64) { return m.reports.Load(), m.malformed.Load() }

// Synced reports whether the model is listed and watching etcd; while it
// is not, its answers may be out of date.
func (m *Model) Synced() bool { return m.watching.Load() && m.reachable.Load() }

// WaitSynced waits until the model is in sync or ctx ends, and reports
// whether it is.
func (m *Model) WaitSynced(ctx context.Context) bool {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !m.Synced() {
		select {
		case <-ctx.Done():
			return m.Synced()
		case <-tick.C:
		}
	}
	return true
}

// Revision is the etcd revision the model reflects.
func (m *Model) Revision() int64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.rev
}
