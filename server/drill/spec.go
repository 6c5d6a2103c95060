package drill

import (
	"cmp"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // drills name IANA time zones; the binary must not depend on the host's zoneinfo

	"github.com/robfig/cron/v3"

	"github.com/switchyard-io/switchyard/sdk/wire"
	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/signal"
)

// Spec is what a drill does, as the API takes it and as it is stored.
// Durations are Go duration strings.
type Spec struct {
	// Switch is the drilled switch of the drill's app.
	Switch string `json:"switch"`
	// Schedule is a five-field cron expression (or a descriptor such as
	// @monthly) in Timezone; empty: the drill runs only when asked.
	Schedule string `json:"schedule,omitempty"`
	Timezone string `json:"timezone,omitempty"`
	// Target is the slice the drill degrades.
	Target Target `json:"target"`
	// Duration is how long the override stays on (at most 1 h).
	Duration string `json:"duration"`
	// EffectWithin bounds "takes effect" (default 5s).
	EffectWithin string `json:"effect_within,omitempty"`
	// RecoverWithin bounds "recovers" after the revert (default 30s).
	RecoverWithin string `json:"recover_within,omitempty"`
	// StartingDeadline: a scheduled run found due at most this late still
	// starts; later it is recorded as missed (default 1m, at least 2s: two
	// steps of the drill job, which may find the cron time up to a step
	// late).
	StartingDeadline string  `json:"starting_deadline,omitempty"`
	Probes           []Probe `json:"probes"`
	// Capacity, when set, adds the verdict "frees capacity".
	Capacity  *Capacity  `json:"capacity,omitempty"`
	Abort     Abort      `json:"abort"`
	Blackout  []Blackout `json:"blackout,omitempty"`
	Preflight Preflight  `json:"preflight"`
	// Enabled: a disabled drill's schedule does not fire (default true).
	Enabled *bool `json:"enabled,omitempty"`
}

// canonical returns s with every duration in the form the API answers
// (server.CanonicalDuration): "168h" for a "7d" as written.
func (s Spec) canonical() Spec {
	for _, d := range []*string{&s.Duration, &s.EffectWithin, &s.RecoverWithin, &s.StartingDeadline, &s.Preflight.TriggerWindow} {
		*d = server.CanonicalDuration(*d)
	}
	s.Probes = slices.Clone(s.Probes)
	for i := range s.Probes {
		s.Probes[i].MaxP99, s.Probes[i].Timeout = server.CanonicalDuration(s.Probes[i].MaxP99), server.CanonicalDuration(s.Probes[i].Timeout)
	}
	s.Blackout = slices.Clone(s.Blackout)
	for i := range s.Blackout {
		s.Blackout[i].Duration = server.CanonicalDuration(s.Blackout[i].Duration)
	}
	return s
}

// Target is the slice a drill degrades: a percent of the instances (by the
// rollout hash), a label selector, or both.
type Target struct {
	Percent  *float64 `json:"percent,omitempty"`
	Selector string   `json:"selector,omitempty"`
}

// String says the slice for people: "5 %", "100 % where canary=true".
func (t Target) String() string {
	pct := 100.0
	if t.Percent != nil {
		pct = *t.Percent
	}
	out := strconv.FormatFloat(pct, 'f', -1, 64) + " %"
	if t.Selector != "" {
		out += " where " + t.Selector
	}
	return out
}

// Probe is an HTTP check of an endpoint the drilled switch degrades.
type Probe struct {
	URL     string            `json:"url"`
	Method  string            `json:"method,omitempty"` // default GET
	Headers map[string]string `json:"headers,omitempty"`
	Body    string            `json:"body,omitempty"`
	// ExpectStatus is the status every answer must have (absent: 200).
	ExpectStatus *int `json:"expect_status,omitempty"`
	// RequiredFields are RFC 6901 JSON pointers every answer must hold.
	RequiredFields []string `json:"required_fields,omitempty"`
	// MaxP99 bounds the p99 of the degraded answers (default 20ms).
	MaxP99 string `json:"max_p99,omitempty"`
	// Requests is the number of requests of each probe round (absent: 10).
	Requests *int `json:"requests,omitempty"`
	// Timeout bounds one request (default 2s).
	Timeout string `json:"timeout,omitempty"`
}

// Capacity asks a run to prove that the degradation frees capacity: the
// load Query measures (calls to the dependency the degradation spares,
// such as allowed_rate{limit="recs-backend"} or a PromQL rate) must fall by
// at least MinDrop from the baseline window, measured just before the
// override is written, to the degraded window, measured while the
// override is on once the slice took it (its last value before the
// revert). A fallback that still calls the struggling dependency frees
// nothing and fails, with both values.
type Capacity struct {
	Source string `json:"source"` // fleet | prometheus
	Query  string `json:"query"`
	// MinDrop is the least relative fall, 0–1 (0.5: the load must halve).
	MinDrop float64 `json:"min_drop"`
}

// Abort ends a run early and reverts it.
type Abort struct {
	// ProbeFailureRate: the degraded probe round failing more than this
	// share (0–1) of its requests aborts the run.
	ProbeFailureRate *float64    `json:"probe_failure_rate,omitempty"`
	Conditions       []Condition `json:"conditions,omitempty"`
}

// Condition is a metric that aborts the run when it crosses a threshold
// (the app's error rate, say), evaluated before the start and every step.
type Condition struct {
	Source    string   `json:"source"` // fleet | prometheus
	Query     string   `json:"query"`
	Op        string   `json:"op"`        // > >= < <=
	Threshold *float64 `json:"threshold"` // required: no default

	// OnNoData is what no data counts as, in the vocabulary triggers and
	// gates share (signal.Hold, …): hold (the default: the run goes on),
	// not_breaching (the same) or breaching (it aborts). The older
	// "continue" and "abort" still mean hold and breaching.
	OnNoData string `json:"on_no_data,omitempty"`
	// OnError is what a failed query counts as: breaching (the default:
	// a drill does not go on blind, and aborting reverts the override),
	// hold or not_breaching (the run goes on).
	OnError string `json:"on_error,omitempty"`
}

// treatment is what an abort condition's on_no_data or on_error means,
// with the older drill words mapped and def for "".
func treatment(t, def string) string {
	switch t {
	case "":
		return def
	case "continue":
		return signal.Hold
	case "abort":
		return signal.Breaching
	}
	return t
}

// Blackout is a time no run may start: a fixed window (start, end) or a
// recurring one (a cron expression in the drill's time zone and a duration).
type Blackout struct {
	Start    *time.Time `json:"start,omitempty"`
	End      *time.Time `json:"end,omitempty"`
	Cron     string     `json:"cron,omitempty"`
	Duration string     `json:"duration,omitempty"`
}

// Preflight tunes the checks before a run.
type Preflight struct {
	// TriggerWindow: refuse while an auto-trigger changed a switch of the
	// app this recently (default 1h).
	TriggerWindow string `json:"trigger_window,omitempty"`
}

// Limits and defaults.
const (
	MaxDuration          = time.Hour
	DefaultEffectWithin  = 5 * time.Second
	DefaultRecoverWithin = 30 * time.Second
	DefaultMaxP99        = 20 * time.Millisecond
	DefaultRequests      = 10
	DefaultProbeTimeout  = 2 * time.Second
	DefaultTriggerWindow = time.Hour
	// DefaultStartingDeadline leaves a scheduled run time to be found by a
	// step of the drill job (every second) even across a change of leader.
	DefaultStartingDeadline = time.Minute
	// minStartingDeadline is two periods of the drill job.
	minStartingDeadline = 2 * time.Second
	// MinScheduleGap is the least time between two scheduled runs (and
	// never less than the drill's duration).
	MinScheduleGap = time.Minute
	maxProbes      = 10
	maxRequests    = 200
	maxFields      = 50
	maxHeaders     = 20
	maxConditions  = 10
	maxBlackouts   = 20
	maxBodyBytes   = 64 << 10
)

// plan is a validated Spec with everything parsed.
type plan struct {
	sched            cron.Schedule // nil: on demand only; zoned otherwise
	loc              *time.Location
	rollout          wire.Rollout
	duration         time.Duration
	effectWithin     time.Duration
	recoverWithin    time.Duration
	startingDeadline time.Duration
	triggerWindow    time.Duration
	probes           []probePlan
	failureRate      float64 // > 1: never
	conditions       []Condition
	capacity         *Capacity
	blackouts        []blackoutPlan
	enabled          bool
}

type probePlan struct {
	Probe
	expectStatus int // ExpectStatus or its default
	requests     int // Requests or its default
	pointers     []wire.Pointer
	maxP99       time.Duration
	timeout      time.Duration
}

type blackoutPlan struct {
	start, end time.Time     // fixed window
	sched      cron.Schedule // recurring
	length     time.Duration
	text       string
}

// scheduleCheckFrom is where minGap starts looking: a fixed time, so a
// spec validates the same way whenever it is checked.
var scheduleCheckFrom = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// cronParser reads five-field expressions and descriptors (@daily, @every 1h).
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// parseCron parses a schedule; the time zone is the drill's, never the
// expression's own.
func parseCron(s string) (cron.Schedule, error) {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "TZ=") || strings.HasPrefix(s, "CRON_TZ=") {
		return nil, fmt.Errorf("must not carry a time zone; set timezone")
	}
	sched, err := cronParser.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("is not a cron expression (minute hour day-of-month month day-of-week, or @daily …): %v", err)
	}
	return sched, nil
}

// duration parses an optional duration field within (min, max]; def when
// empty.
func duration(f *server.FieldErrors, field, s string, def, max time.Duration, zeroOK bool) time.Duration {
	if strings.TrimSpace(s) == "" {
		return def
	}
	d, err := server.ParseDuration(strings.TrimSpace(s))
	switch {
	case err != nil:
		f.Addf(field, "must be a duration such as 30s or 5m")
	case d < 0 || (d == 0 && !zeroOK):
		f.Addf(field, "must be more than 0")
	case d > max:
		f.Addf(field, "must be at most %s", server.ShortDuration(max))
	}
	return d
}

// compile validates s field by field (every error, named like the API's
// fields) and returns its plan.
func (s *Spec) compile() (*plan, error) {
	var v server.FieldErrors
	p := &plan{enabled: s.Enabled == nil || *s.Enabled, failureRate: 2}
	if !wire.ValidName(s.Switch) {
		v.Addf("switch", "must name a switch of the app (^[a-z0-9][a-z0-9._-]{0,62}$)")
	}
	var err error
	p.loc = time.UTC
	if s.Timezone != "" {
		if p.loc, err = time.LoadLocation(s.Timezone); err != nil || s.Timezone == "Local" {
			v.Addf("timezone", "%q is not an IANA time zone such as Europe/Berlin or UTC", s.Timezone)
			p.loc = time.UTC
		}
	}
	if strings.TrimSpace(s.Schedule) != "" {
		if sched, err := parseCron(s.Schedule); err != nil {
			v.Addf("schedule", "%v", err)
		} else {
			p.sched = zoned{spec: sched, loc: p.loc}
		}
	}
	p.rollout = wire.Rollout{Percent: 100, Stickiness: wire.StickyInstance, Selector: strings.TrimSpace(s.Target.Selector)}
	if s.Target.Percent != nil {
		p.rollout.Percent = *s.Target.Percent
	}
	if s.Target.Percent == nil && p.rollout.Selector == "" {
		v.Addf("target", "needs a percent, a selector or both: the slice the drill degrades")
	}
	switch {
	case math.IsNaN(p.rollout.Percent) || p.rollout.Percent <= 0 || p.rollout.Percent > 100:
		v.Addf("target.percent", "must be more than 0 and at most 100")
	default:
		if err := p.rollout.Validate(); err != nil {
			v.Addf("target."+err.(*wire.FieldError).Field, "%s", err.(*wire.FieldError).Msg)
		}
	}
	if strings.TrimSpace(s.Duration) == "" {
		v.Addf("duration", "is required: how long the drill keeps the switch on, at most 1h")
	} else {
		p.duration = duration(&v, "duration", s.Duration, 0, MaxDuration, false)
	}
	p.effectWithin = duration(&v, "effect_within", s.EffectWithin, DefaultEffectWithin, time.Minute, false)
	p.recoverWithin = duration(&v, "recover_within", s.RecoverWithin, DefaultRecoverWithin, 10*time.Minute, false)
	if p.startingDeadline = duration(&v, "starting_deadline", s.StartingDeadline, DefaultStartingDeadline, 24*time.Hour, false); p.startingDeadline > 0 && p.startingDeadline < minStartingDeadline {
		v.Addf("starting_deadline", "must be at least %s: the drill job steps every second, so it may find a cron time a step late", server.ShortDuration(minStartingDeadline))
	}
	if z, ok := p.sched.(zoned); ok {
		least := max(MinScheduleGap, p.duration)
		if gap := minGap(z.spec, scheduleCheckFrom); gap > 0 && gap < least {
			v.Addf("schedule", "runs as often as every %s; a drill's runs must be at least %s apart (1m, and never less than its duration)",
				server.ShortDuration(gap), server.ShortDuration(least))
		}
	}
	p.triggerWindow = duration(&v, "preflight.trigger_window", s.Preflight.TriggerWindow, DefaultTriggerWindow, 24*time.Hour, true)
	switch {
	case len(s.Probes) == 0:
		v.Addf("probes", "needs at least one probe: the fallback is checked on a real endpoint")
	case len(s.Probes) > maxProbes:
		v.Addf("probes", "at most %d probes", maxProbes)
	}
	for i := range s.Probes {
		p.probes = append(p.probes, s.Probes[i].compile(&v, fmt.Sprintf("probes[%d]", i)))
	}
	if r := s.Abort.ProbeFailureRate; r != nil {
		if !(*r >= 0 && *r <= 1) {
			v.Addf("abort.probe_failure_rate", "must be between 0 and 1")
		}
		p.failureRate = *r
	}
	if len(s.Abort.Conditions) > maxConditions {
		v.Addf("abort.conditions", "at most %d conditions", maxConditions)
	}
	for i, c := range s.Abort.Conditions {
		f := fmt.Sprintf("abort.conditions[%d]", i)
		if c.Source != "fleet" && c.Source != "prometheus" {
			v.Addf(f+".source", `must be "fleet" or "prometheus"`)
		}
		if strings.TrimSpace(c.Query) == "" {
			v.Addf(f+".query", "is required")
		}
		if _, ok := ops[c.Op]; !ok {
			v.Addf(f+".op", "must be one of >, >=, <, <=")
		}
		if c.Threshold == nil {
			v.Addf(f+".threshold", "is required: the number the value is compared with")
		} else if math.IsNaN(*c.Threshold) || math.IsInf(*c.Threshold, 0) {
			v.Addf(f+".threshold", "must be a finite number")
		}
		if err := signal.CheckTreatment(treatment(c.OnNoData, signal.Hold)); err != nil {
			v.Add(f+".on_no_data", err.Error())
		}
		if err := signal.CheckTreatment(treatment(c.OnError, signal.Breaching)); err != nil {
			v.Add(f+".on_error", err.Error())
		}
	}
	p.conditions = s.Abort.Conditions
	if c := s.Capacity; c != nil {
		if c.Source != "fleet" && c.Source != "prometheus" {
			v.Addf("capacity.source", `must be "fleet" or "prometheus"`)
		}
		if strings.TrimSpace(c.Query) == "" {
			v.Addf("capacity.query", "is required: the load the degradation must lower, such as allowed_rate{limit=\"recs-backend\"}")
		}
		if !(c.MinDrop > 0 && c.MinDrop <= 1) {
			v.Addf("capacity.min_drop", "must be a share above 0 and at most 1 (0.5: the load must halve)")
		}
		p.capacity = c
	}
	if len(s.Blackout) > maxBlackouts {
		v.Addf("blackout", "at most %d windows", maxBlackouts)
	}
	for i, b := range s.Blackout {
		p.blackouts = append(p.blackouts, b.compile(&v, fmt.Sprintf("blackout[%d]", i)))
	}
	if err := v.Err(); err != nil {
		return nil, err
	}
	return p, nil
}

func (pr *Probe) compile(v *server.FieldErrors, f string) probePlan {
	out := probePlan{Probe: *pr}
	u, err := url.Parse(pr.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || len(pr.URL) > 2000 {
		v.Addf(f+".url", "must be an http:// or https:// URL with a host")
	}
	if out.Method == "" {
		out.Method = http.MethodGet
	}
	switch out.Method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
	default:
		v.Addf(f+".method", "must be GET, HEAD, POST, PUT, PATCH or DELETE")
	}
	if len(pr.Headers) > maxHeaders {
		v.Addf(f+".headers", "at most %d headers", maxHeaders)
	}
	for k, val := range pr.Headers {
		if !validHeaderName(k) || !wire.Printable(val) || len(val) > 4096 {
			v.Addf(f+".headers", "%q: a header needs a token name and a printable value", k)
		}
	}
	if len(pr.Body) > maxBodyBytes {
		v.Addf(f+".body", "must be at most 64 KiB")
	}
	out.expectStatus = cmp.Or(deref(pr.ExpectStatus), http.StatusOK)
	if pr.ExpectStatus != nil && (*pr.ExpectStatus < 100 || *pr.ExpectStatus > 599) {
		v.Addf(f+".expect_status", "must be an HTTP status, 100–599")
	}
	if len(pr.RequiredFields) > maxFields {
		v.Addf(f+".required_fields", "at most %d pointers", maxFields)
	}
	for j, s := range pr.RequiredFields {
		ptr, err := wire.ParsePointer(s)
		if err != nil {
			v.Addf(fmt.Sprintf("%s.required_fields[%d]", f, j), "%v", err)
			continue
		}
		out.pointers = append(out.pointers, ptr)
	}
	out.maxP99 = duration(v, f+".max_p99", pr.MaxP99, DefaultMaxP99, 10*time.Second, false)
	out.timeout = duration(v, f+".timeout", pr.Timeout, DefaultProbeTimeout, 30*time.Second, false)
	out.requests = cmp.Or(deref(pr.Requests), DefaultRequests)
	if pr.Requests != nil && (*pr.Requests < 1 || *pr.Requests > maxRequests) {
		v.Addf(f+".requests", "must be 1–%d", maxRequests)
	} else if b := out.budget(); b > MaxRoundBudget {
		v.Addf(f+".requests", "%d requests × a timeout of %s is %s; a round may take at most %s", out.requests,
			server.ShortDuration(out.timeout), server.ShortDuration(b), server.ShortDuration(MaxRoundBudget))
	}
	return out
}

// deref is *p, or 0 when p is nil (an absent field).
func deref(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

func validHeaderName(k string) bool {
	if k == "" || len(k) > 100 {
		return false
	}
	for _, r := range k {
		if r <= ' ' || r >= 0x7f || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r) {
			return false
		}
	}
	return !strings.EqualFold(k, "Host") && !strings.EqualFold(k, "Content-Length")
}

func (b *Blackout) compile(v *server.FieldErrors, f string) blackoutPlan {
	var out blackoutPlan
	fixed, recurring := b.Start != nil || b.End != nil, b.Cron != "" || b.Duration != ""
	switch {
	case fixed && recurring:
		v.Addf(f, "is either start and end, or cron and duration")
	case fixed:
		if b.Start == nil || b.End == nil || !b.End.After(*b.Start) {
			v.Addf(f+".end", "needs a start and an end after it (RFC 3339 times)")
			return out
		}
		out.start, out.end = b.Start.UTC(), b.End.UTC()
		out.text = out.start.Format(time.RFC3339) + " – " + out.end.Format(time.RFC3339)
	case recurring:
		sched, err := parseCron(b.Cron)
		if err != nil {
			v.Addf(f+".cron", "%v", err)
		}
		if strings.TrimSpace(b.Duration) == "" {
			v.Addf(f+".duration", "is required: how long each window lasts")
		}
		out.sched, out.length = sched, duration(v, f+".duration", b.Duration, 0, 7*24*time.Hour, false)
		out.text = fmt.Sprintf("%s for %s", strings.TrimSpace(b.Cron), b.Duration)
	default:
		v.Addf(f, "needs start and end, or cron and duration")
	}
	return out
}

// ops are the comparisons of abort conditions.
var ops = map[string]func(a, b float64) bool{
	">":  func(a, b float64) bool { return a > b },
	">=": func(a, b float64) bool { return a >= b },
	"<":  func(a, b float64) bool { return a < b },
	"<=": func(a, b float64) bool { return a <= b },
}
