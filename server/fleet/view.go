package fleet

import (
	"math"
	"slices"
	"sort"
	"time"

	"github.com/switchyard-io/switchyard/sdk/wire"
)

// InstanceView is one live SDK instance as the console shows it.
type InstanceView struct {
	App             string            `json:"app"`
	ID              string            `json:"instance_id"`
	Labels          map[string]string `json:"labels,omitempty"`
	SDKVersion      string            `json:"sdk_version"`
	AppliedRevision int64             `json:"applied_revision"`
	AppliedAt       time.Time         `json:"applied_at"`
	StartedAt       time.Time         `json:"started_at"`
	// Signals is false for SDKs that send no signals (older versions).
	Signals        bool          `json:"signals"`
	LastReport     *time.Time    `json:"last_report,omitempty"`
	ReportInterval time.Duration `json:"report_interval_ns,omitempty"`
	// Stale: the instance has not applied the newest published switch
	// revision of its app.
	Stale bool `json:"stale"`
	// Malformed says why its last value did not parse ("" when it did);
	// the previous good state is shown.
	Malformed string `json:"malformed,omitempty"`
	// Degraded counts switches it answered degraded since its last report.
	Degraded     int     `json:"degraded_switches"`
	DegradedRate float64 `json:"degraded_per_second"`
	RejectedRate float64 `json:"rejected_per_second"`
	BreakersOpen int     `json:"breakers_open"`

	Switches []InstanceSwitch `json:"switches,omitempty"`
	Limits   []InstanceLimit  `json:"limits,omitempty"`
}

// InstanceSwitch is one switch's signals at one instance.
type InstanceSwitch struct {
	// App is the app whose switch the instance evaluated: its own, or
	// _global when only _global publishes a switch of that name.
	App          string     `json:"app"`
	Name         string     `json:"name"`
	Degraded     uint64     `json:"degraded"`
	Fallbacks    uint64     `json:"fallbacks"`
	DegradedRate float64    `json:"degraded_per_second"`
	FallbackRate float64    `json:"fallbacks_per_second"`
	LastRead     *time.Time `json:"last_read,omitempty"`
}

// InstanceLimit is one limit rule's signals at one instance.
type InstanceLimit struct {
	Resource       string  `json:"resource"`
	Allowed        uint64  `json:"allowed"`
	Rejected       uint64  `json:"rejected"`
	ShadowRejected uint64  `json:"shadow_rejected"`
	AllowedRate    float64 `json:"allowed_per_second"`
	RejectedRate   float64 `json:"rejected_per_second"`
	ShadowRate     float64 `json:"shadow_rejected_per_second"`
	Breaker        string  `json:"breaker,omitempty"`
}

// Apps returns the apps that have live instances, sorted.
func (m *Model) Apps() []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var out []string
	for name, a := range m.apps {
		if len(a.instances) > 0 {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// Instances returns the live instances of app, sorted by id.
func (m *Model) Instances(app string) []InstanceView {
	m.mu.RLock()
	defer m.mu.RUnlock()
	a := m.apps[app]
	if a == nil {
		return []InstanceView{}
	}
	want := m.want(app)
	out := make([]InstanceView, 0, len(a.instances))
	for _, in := range a.instances {
		out = append(out, in.view(a, m.apps[wire.GlobalApp], want))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Instance returns one instance, false when it is not live.
func (m *Model) Instance(app, id string) (InstanceView, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	a := m.apps[app]
	if a == nil || a.instances[id] == nil {
		return InstanceView{}, false
	}
	return a.instances[id].view(a, m.apps[wire.GlobalApp], m.want(app)), true
}

func (in *instance) view(a *appState, global *appState, want int64) InstanceView {
	v := InstanceView{
		App: a.name, ID: in.id, Labels: in.labels, SDKVersion: in.sdkVersion,
		AppliedRevision: in.appliedRevision, AppliedAt: in.appliedAt, StartedAt: in.startedAt,
		Signals: in.reportAt > 0, ReportInterval: in.interval, Malformed: in.malformed,
		Stale: in.appliedRevision < want,
	}
	if in.reportAt > 0 {
		t := time.Unix(in.reportAt, 0).UTC()
		v.LastReport = &t
	}
	for i, name := range a.names {
		sig := in.switches[uint32(i)]
		read := in.lastRead(uint32(i))
		if sig == nil && read == 0 {
			continue
		}
		s := InstanceSwitch{App: a.name, Name: name}
		if _, own := a.effective(name); !own && global != nil {
			if _, ok := global.effective(name); ok {
				s.App = wire.GlobalApp
			}
		}
		if read > 0 {
			t := time.Unix(read, 0).UTC()
			s.LastRead = &t
		}
		if sig != nil {
			s.Degraded, s.Fallbacks, s.DegradedRate, s.FallbackRate = sig.degraded, sig.fallbacks, sig.degradedRate, sig.fallbackRate
			if sig.degradedRate > 0 {
				v.Degraded++
				v.DegradedRate += sig.degradedRate
			}
		}
		v.Switches = append(v.Switches, s)
	}
	for res, l := range in.limits {
		v.Limits = append(v.Limits, InstanceLimit{
			Resource: res, Allowed: l.allowed, Rejected: l.rejected, ShadowRejected: l.shadow,
			AllowedRate: l.allowedRate, RejectedRate: l.rejectedRate, ShadowRate: l.shRate, Breaker: l.breaker,
		})
		v.RejectedRate += l.rejectedRate
		if l.breaker == wire.BreakerOpen {
			v.BreakersOpen++
		}
	}
	sort.Slice(v.Limits, func(i, j int) bool { return v.Limits[i].Resource < v.Limits[j].Resource })
	return v
}

// Want is the newest switch or override revision an instance of app must
// have applied to be current (its app's and _global's).
func (m *Model) Want(app string) int64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.want(app)
}

// want is Want; callers hold m.mu.
func (m *Model) want(app string) int64 {
	var rev int64
	for _, name := range []string{app, wire.GlobalApp} {
		if a := m.apps[name]; a != nil {
			for _, p := range a.switches {
				rev = max(rev, p.modRev)
			}
			for _, p := range a.overrides {
				rev = max(rev, p.modRev)
			}
		}
	}
	return rev
}

// Member is an instance as a filter sees it.
type Member struct {
	ID     string
	Labels map[string]string
}

// AppliedBy counts the live instances of app that match (nil: all) and how
// many of them have applied etcd revision rev. For _global it counts the
// instances of every app.
func (m *Model) AppliedBy(app string, rev int64, match func(Member) bool) (applied, total int) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	m.eachInstance(app, "", func(_ *appState, in *instance) {
		if match != nil && !match(Member{in.id, in.labels}) {
			return
		}
		total++
		if in.appliedRevision >= rev {
			applied++
		}
	})
	return applied, total
}

// eachInstance calls fn for the live instances that evaluate app's switch
// name: app's own, or for _global every app's that has no switch of that
// name of its own (its own value wins). An empty name means any.
func (m *Model) eachInstance(app, name string, fn func(*appState, *instance)) {
	visit := func(a *appState) {
		for _, in := range a.instances {
			fn(a, in)
		}
	}
	if app != wire.GlobalApp {
		if a := m.apps[app]; a != nil {
			visit(a)
		}
		return
	}
	for _, a := range m.apps {
		if _, own := a.effective(name); name != "" && own && a.name != wire.GlobalApp {
			continue
		}
		visit(a)
	}
}

// SwitchView is the fleet's view of one switch.
type SwitchView struct {
	App  string `json:"app"`
	Name string `json:"name"`
	// Value is the effective published value (the drill override while one
	// exists), nil when etcd holds none.
	Value    *wire.Switch `json:"value,omitempty"`
	Override bool         `json:"override"`
	// Revision is the etcd revision that wrote Value.
	Revision int64 `json:"revision"`
	// Live instances evaluate the switch; Signals of them report signals.
	Live    int `json:"live"`
	Signals int `json:"signals"`
	// Applied have applied Revision; Targeted are in Value's rollout.
	Applied  int `json:"applied"`
	Targeted int `json:"targeted"`
	// AnsweringDegraded answered it degraded since their last report.
	AnsweringDegraded int        `json:"answering_degraded"`
	DegradedRate      float64    `json:"degraded_per_second"`
	FallbackRate      float64    `json:"fallbacks_per_second"`
	LastRead          *time.Time `json:"last_read,omitempty"`
	// DegradedP99 is the p99 latency of the degraded requests the SDK
	// middleware served between the instances' last two reports (nil: none).
	DegradedP99 *time.Duration `json:"degraded_p99_ns,omitempty"`
	// SignalsAt is the oldest of the reporting instances' last reports:
	// the figures above count answers up to then, so a change made later
	// shows in them only with the next reports.
	SignalsAt *time.Time `json:"signals_at,omitempty"`
	// Verification is the shadow verification of the switch's fallback
	// (L1/L2, while off) by its live instances; nil when none reports any.
	Verification *Verification `json:"verification,omitempty"`

	Instances []SwitchInstance `json:"instances,omitempty"`
}

// Verification sums the shadow verification of one switch's fallback
// over the live instances that report it. Each instance is judged by its
// newest outcome: verified (a match), mismatching, or failing (an error or
// a timeout since its newest match or mismatch is not told apart here, so
// it counts in the sums only).
type Verification struct {
	// Instances report verification; Verified and Mismatching of them
	// had a match, or a mismatch, as their newest compared outcome.
	Instances   int `json:"instances"`
	Verified    int `json:"verified"`
	Mismatching int `json:"mismatching"`
	// Cumulative outcomes since the instances started.
	Match    uint64 `json:"match"`
	Mismatch uint64 `json:"mismatch"`
	Errors   uint64 `json:"errors"`
	Timeouts uint64 `json:"timeouts"`
	// LastMatch and LastMismatch are the newest of any instance.
	LastMatch    *time.Time `json:"last_match,omitempty"`
	LastMismatch *time.Time `json:"last_mismatch,omitempty"`
	// Diffs are those of the newest mismatch: JSON pointers and types,
	// never values.
	Diffs []string `json:"diffs,omitempty"`
}

// MatchShare is the share of samples whose degraded answer matched, of
// all samples (errors and timeouts included); false without samples.
func (v *Verification) MatchShare() (float64, bool) {
	if v == nil {
		return 0, false
	}
	n := v.Match + v.Mismatch + v.Errors + v.Timeouts
	if n == 0 {
		return 0, false
	}
	return float64(v.Match) / float64(n), true
}

// add folds one instance's signal in.
func (v *Verification) add(s *wire.VerifySignal) {
	v.Instances++
	v.Match, v.Mismatch, v.Errors, v.Timeouts = v.Match+s.Match, v.Mismatch+s.Mismatch, v.Errors+s.Error, v.Timeouts+s.Timeout
	switch {
	case s.LastMatch > 0 && s.LastMatch >= s.LastMismatch:
		v.Verified++
	case s.LastMismatch > 0:
		v.Mismatching++
	}
	if s.LastMatch > 0 && (v.LastMatch == nil || s.LastMatch > v.LastMatch.Unix()) {
		t := time.Unix(s.LastMatch, 0).UTC()
		v.LastMatch = &t
	}
	if s.LastMismatch > 0 && (v.LastMismatch == nil || s.LastMismatch > v.LastMismatch.Unix()) {
		t := time.Unix(s.LastMismatch, 0).UTC()
		v.LastMismatch, v.Diffs = &t, s.Diffs
	}
}

// SwitchInstance is one instance's part in a SwitchView.
type SwitchInstance struct {
	ID           string     `json:"instance_id"`
	App          string     `json:"app"`
	Applied      bool       `json:"applied"`
	Targeted     bool       `json:"targeted"`
	Degraded     uint64     `json:"degraded"`
	Fallbacks    uint64     `json:"fallbacks"`
	DegradedRate float64    `json:"degraded_per_second"`
	LastRead     *time.Time `json:"last_read,omitempty"`
	Signals      bool       `json:"signals"`
}

// Switch returns the fleet's view of switch app/name, with one entry per
// instance.
func (m *Model) Switch(app, name string) SwitchView {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.switchView(app, name, true)
}

// Summary is Switch without the per-instance entries: what a page listing
// many switches needs, at a fraction of the cost with a large fleet.
func (m *Model) Summary(app, name string) SwitchView {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.switchView(app, name, false)
}

// switchView builds a SwitchView (callers hold m.mu).
func (m *Model) switchView(app, name string, perInstance bool) SwitchView {
	v := SwitchView{App: app, Name: name}
	if a := m.apps[app]; a != nil {
		if p, ok := a.effective(name); ok {
			v.Value, v.Revision, v.Override = p.sw, p.modRev, a.overrides[name].sw != nil
		}
	}
	var latency, prev []uint64
	var lastRead, signalsAt int64
	m.eachInstance(app, name, func(a *appState, in *instance) {
		if in.reportAt > 0 && (signalsAt == 0 || in.reportAt < signalsAt) {
			signalsAt = in.reportAt
		}
		si := SwitchInstance{ID: in.id, App: a.name, Applied: v.Value != nil && in.appliedRevision >= v.Revision, Signals: in.reportAt > 0}
		si.Targeted = v.Value != nil && v.Value.Includes(in.id, in.labels)
		if i, ok := a.index[name]; ok {
			if r := in.lastRead(i); r > 0 {
				lastRead = max(lastRead, r)
				if perInstance { // a Summary allocates nothing per instance
					t := time.Unix(r, 0).UTC()
					si.LastRead = &t
				}
			}
			if vs := in.verify[i]; vs != nil {
				if v.Verification == nil {
					v.Verification = &Verification{}
				}
				v.Verification.add(vs)
			}
			if sig := in.switches[i]; sig != nil {
				si.Degraded, si.Fallbacks, si.DegradedRate = sig.degraded, sig.fallbacks, sig.degradedRate
				v.DegradedRate += sig.degradedRate
				v.FallbackRate += sig.fallbackRate
				if sig.degradedRate > 0 {
					v.AnsweringDegraded++
				}
				latency, prev = addBuckets(latency, sig.latency), addBuckets(prev, sig.prevLat)
			}
		}
		v.Live++
		if si.Signals {
			v.Signals++
		}
		if si.Applied {
			v.Applied++
		}
		if si.Targeted {
			v.Targeted++
		}
		if perInstance {
			v.Instances = append(v.Instances, si)
		}
	})
	if lastRead > 0 {
		t := time.Unix(lastRead, 0).UTC()
		v.LastRead = &t
	}
	if signalsAt > 0 {
		t := time.Unix(signalsAt, 0).UTC()
		v.SignalsAt = &t
	}
	if p, ok := quantile(subBuckets(latency, prev), 0.99); ok {
		v.DegradedP99 = &p
	}
	sort.Slice(v.Instances, func(i, j int) bool {
		return v.Instances[i].App+"/"+v.Instances[i].ID < v.Instances[j].App+"/"+v.Instances[j].ID
	})
	return v
}

// Switches returns the names of app's switches the fleet knows: published
// or reported by an instance.
func (m *Model) Switches(app string) []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if a := m.apps[app]; a != nil {
		return slices.Sorted(slices.Values(a.names))
	}
	return nil
}

// LimitView is the fleet's view of one limit rule.
type LimitView struct {
	App          string  `json:"app"`
	Resource     string  `json:"resource"`
	Instances    int     `json:"instances"` // live instances reporting the rule
	AllowedRate  float64 `json:"allowed_per_second"`
	RejectedRate float64 `json:"rejected_per_second"`
	ShadowRate   float64 `json:"shadow_rejected_per_second"`
	BreakersOpen int     `json:"breakers_open"`
	HalfOpen     int     `json:"breakers_half_open"`
}

// Rejecting reports whether the rule refuses requests now, or would (shadow),
// or has a breaker that is not closed somewhere.
func (l LimitView) Rejecting() bool {
	return l.RejectedRate > 0 || l.ShadowRate > 0 || l.BreakersOpen > 0 || l.HalfOpen > 0
}

// Limit returns the fleet's view of limit rule app/resource.
func (m *Model) Limit(app, resource string) LimitView {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.limit(app, resource)
}

func (m *Model) limit(app, resource string) LimitView {
	v := LimitView{App: app, Resource: resource}
	m.eachInstance(app, "", func(_ *appState, in *instance) {
		l := in.limits[resource]
		if l == nil {
			return
		}
		v.Instances++
		v.AllowedRate += l.allowedRate
		v.RejectedRate += l.rejectedRate
		v.ShadowRate += l.shRate
		switch l.breaker {
		case wire.BreakerOpen:
			v.BreakersOpen++
		case wire.BreakerHalfOpen:
			v.HalfOpen++
		}
	})
	return v
}

// Rejecting returns the limit rules of every app that refuse requests now
// (or would, in shadow mode) or have a breaker that is not closed, by app
// and resource.
func (m *Model) Rejecting() []LimitView {
	m.mu.RLock()
	defer m.mu.RUnlock()
	var out []LimitView
	for name, a := range m.apps {
		seen := map[string]bool{}
		for _, in := range a.instances {
			for res := range in.limits {
				if seen[res] {
					continue
				}
				seen[res] = true
				if v := m.limit(name, res); v.Rejecting() {
					out = append(out, v)
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].App+"/"+out[i].Resource < out[j].App+"/"+out[j].Resource })
	return out
}

func addBuckets(acc, b []uint64) []uint64 {
	if len(b) == 0 {
		return acc
	}
	if len(acc) < len(b) {
		acc = append(acc, make([]uint64, len(b)-len(acc))...)
	}
	for i, n := range b {
		acc[i] += n
	}
	return acc
}

// subBuckets is cur - prev per bucket (the requests between two reports).
func subBuckets(cur, prev []uint64) []uint64 {
	out := make([]uint64, len(cur))
	for i, n := range cur {
		if i < len(prev) && prev[i] <= n {
			n -= prev[i]
		}
		out[i] = n
	}
	return out
}

// quantile estimates the q-quantile of a wire.LatencyBuckets histogram as
// the upper bound of the bucket it falls in (the last bucket has none: it
// answers the last bound doubled, "above every bound"). false: no requests.
func quantile(counts []uint64, q float64) (time.Duration, bool) {
	var total uint64
	for _, n := range counts {
		total += n
	}
	if total == 0 {
		return 0, false
	}
	rank := uint64(math.Ceil(q * float64(total)))
	var seen uint64
	for i, n := range counts {
		seen += n
		if seen >= rank {
			if i < len(wire.LatencyBuckets) {
				return wire.LatencyBuckets[i], true
			}
			break
		}
	}
	return 2 * wire.LatencyBuckets[len(wire.LatencyBuckets)-1], true
}
