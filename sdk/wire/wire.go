// Package wire defines what the console publishes to etcd and what every SDK
// reads back: the key layout under /switchyard/v1/<namespace>/ and the JSON
// values stored there.
//
// It is the one contract between the control plane and the SDK. The console
// imports it to publish; the SDK imports it to decode. It depends on the
// standard library only and must never grow a dependency on console code.
// Changing a field's name or meaning here is a protocol change: existing SDKs
// and snapshots on disk keep the old shape.
package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Root is the key prefix shared by every Switchyard key.
const Root = "/switchyard/v1/"

// GlobalApp is the reserved app whose switches every SDK also watches.
const GlobalApp = "_global"

// Kinds of keys below a namespace prefix.
const (
	KindSwitches  = "switches"
	KindLimits    = "limits"
	KindOverrides = "overrides"
	KindInstances = "instances"
	KindElection  = "election"
)

// NamePattern is the syntax of app, switch and namespace names.
var NamePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// ValidName reports whether s is a valid app, switch or namespace name.
func ValidName(s string) bool { return NamePattern.MatchString(s) }

// ValidApp reports whether app is a valid app name or the reserved GlobalApp.
func ValidApp(app string) bool { return app == GlobalApp || ValidName(app) }

// NamespacePrefix returns "/switchyard/v1/<ns>/".
func NamespacePrefix(ns string) string { return Root + ns + "/" }

// KindPrefix returns the prefix of every key of one kind in a namespace,
// for example "/switchyard/v1/prod/switches/".
func KindPrefix(ns, kind string) string { return NamespacePrefix(ns) + kind + "/" }

// AppPrefix returns the prefix of one app's keys of one kind,
// for example "/switchyard/v1/prod/switches/checkout/".
func AppPrefix(ns, kind, app string) string { return KindPrefix(ns, kind) + app + "/" }

// SwitchKey is where a switch is published.
func SwitchKey(ns, app, name string) string { return AppPrefix(ns, KindSwitches, app) + name }

// OverrideKey is where a lease-bound override of a switch lives.
func OverrideKey(ns, app, name string) string { return AppPrefix(ns, KindOverrides, app) + name }

// LimitKey is where a limit rule is published; the resource is path-escaped
// because it may contain slashes and spaces ("POST /orders").
func LimitKey(ns, app, resource string) string {
	return AppPrefix(ns, KindLimits, app) + url.PathEscape(resource)
}

// InstanceKey is where an SDK instance registers itself.
func InstanceKey(ns, app, instanceID string) string {
	return AppPrefix(ns, KindInstances, app) + url.PathEscape(instanceID)
}

// ElectionKey is the prefix the consoles campaign on.
func ElectionKey(ns string) string { return NamespacePrefix(ns) + KindElection + "/scheduler" }

// ParsedKey is a key split into its parts.
type ParsedKey struct {
	Kind string
	App  string
	Name string // switch name, unescaped resource or instance id
}

// ParseKey splits a key below NamespacePrefix(ns). It fails for keys outside
// the namespace or with a shape it does not know.
func ParseKey(ns, key string) (ParsedKey, error) {
	rest, ok := strings.CutPrefix(key, NamespacePrefix(ns))
	if !ok {
		return ParsedKey{}, fmt.Errorf("wire: key %q is outside namespace %q", key, ns)
	}
	parts := strings.SplitN(rest, "/", 3)
	if len(parts) != 3 || parts[1] == "" || parts[2] == "" {
		return ParsedKey{}, fmt.Errorf("wire: malformed key %q", key)
	}
	name := parts[2]
	if parts[0] == KindLimits || parts[0] == KindInstances {
		var err error
		if name, err = url.PathUnescape(name); err != nil {
			return ParsedKey{}, fmt.Errorf("wire: malformed key %q: %w", key, err)
		}
	}
	return ParsedKey{Kind: parts[0], App: parts[1], Name: name}, nil
}

// Level is a degradation level, written "L1" … "L5".
type Level string

// The five degradation levels.
const (
	L1 Level = "L1" // fallback: return the configured fallback value
	L2 Level = "L2" // stale: serve cached data up to MaxStaleness
	L3 Level = "L3" // feature_off: turn a non-core feature off
	L4 Level = "L4" // read_only: reads work, writes fail explicitly
	L5 Level = "L5" // queue_writes: writes are queued and answered 202
)

var levelNames = map[Level]string{
	L1: "fallback", L2: "stale", L3: "feature_off", L4: "read_only", L5: "queue_writes",
}

// Valid reports whether l is one of L1…L5.
func (l Level) Valid() bool { _, ok := levelNames[l]; return ok }

// Label is the name of the level for people, such as "read_only".
func (l Level) Label() string { return levelNames[l] }

// Rank is 1…5 for L1…L5 and 0 for anything else.
func (l Level) Rank() int {
	if !l.Valid() {
		return 0
	}
	return int(l[1] - '0')
}

// State of a switch.
const (
	StateOn  = "on"
	StateOff = "off"
)

// Stickiness decides what the rollout hash is computed over.
const (
	StickyInstance = "instance" // hash of the SDK instance id
	StickyKey      = "key"      // hash of a request key carried in the context
)

// Rollout says who sees an "on" switch.
type Rollout struct {
	// Percent is 0–100 with at most two decimals.
	Percent float64 `json:"percent"`
	// Stickiness is "instance" or "key"; empty means "instance".
	Stickiness string `json:"stickiness,omitempty"`
	// Selector is a comma-separated list of label=value pairs that must all
	// match the instance labels ("zone=a,canary=true"). Empty matches all.
	Selector string `json:"selector,omitempty"`
	// Include and Exclude name request keys (tenants, users: the key of
	// WithKey) explicitly, at most MaxListKeys each, no key in both. On an
	// instance the selector matches, a request whose key is excluded is
	// not degraded, one whose key is included is, and any other is decided
	// by Percent: exclude wins, then include, then percent.
	Include []string `json:"include,omitempty"`
	Exclude []string `json:"exclude,omitempty"`
}

// Limits of a rollout's key lists.
const (
	MaxListKeys   = 10000 // keys per list
	MaxListKeyLen = 128   // bytes per key
)

// Basis returns Percent in hundredths of a percent (0…10000).
func (r Rollout) Basis() int { return int(r.Percent*100 + 0.5) }

// Validate checks percent range and precision, stickiness and selector.
// The error names the field relative to the rollout ("percent").
func (r Rollout) Validate() error {
	if !(r.Percent >= 0 && r.Percent <= 100) { // also refuses NaN
		return &FieldError{Field: "percent", Msg: "must be between 0 and 100"}
	}
	if d := r.Percent*100 - float64(r.Basis()); d > 1e-6 || d < -1e-6 {
		return &FieldError{Field: "percent", Msg: "must have at most two decimals"}
	}
	switch r.Stickiness {
	case "", StickyInstance, StickyKey:
	default:
		return &FieldError{Field: "stickiness", Msg: `must be "instance" or "key"`}
	}
	if _, err := ParseSelector(r.Selector); err != nil {
		return &FieldError{Field: "selector", Msg: err.Error()}
	}
	if err := validateKeys("include", r.Include); err != nil {
		return err
	}
	if err := validateKeys("exclude", r.Exclude); err != nil {
		return err
	}
	if len(r.Include) > 0 && len(r.Exclude) > 0 {
		in := make(map[string]struct{}, len(r.Include))
		for _, k := range r.Include {
			in[k] = struct{}{}
		}
		for i, k := range r.Exclude {
			if _, ok := in[k]; ok {
				return &FieldError{Field: fmt.Sprintf("exclude[%d]", i), Msg: fmt.Sprintf("key %q is also in include", k)}
			}
		}
	}
	return nil
}

// validateKeys checks one key list: its length and each key's.
func validateKeys(field string, keys []string) error {
	if len(keys) > MaxListKeys {
		return &FieldError{Field: field, Msg: fmt.Sprintf("has %d keys, at most %d are allowed", len(keys), MaxListKeys)}
	}
	for i, k := range keys {
		if k == "" || len(k) > MaxListKeyLen || !Printable(k) {
			return &FieldError{Field: fmt.Sprintf("%s[%d]", field, i), Msg: fmt.Sprintf("must be 1–%d printable characters", MaxListKeyLen)}
		}
	}
	return nil
}

// Equal reports whether two rollouts pick the same members.
func (r Rollout) Equal(o Rollout) bool {
	return r.Basis() == o.Basis() && r.Stickiness == o.Stickiness && r.Selector == o.Selector &&
		slices.Equal(r.Include, o.Include) && slices.Equal(r.Exclude, o.Exclude)
}

// Selector is a parsed label selector: every pair must match.
type Selector []LabelPair

// LabelPair is one label=value requirement.
type LabelPair struct{ Key, Value string }

var labelPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/-]{0,62}$`)

// ParseSelector parses "k=v,k2=v2". Empty input gives an empty selector.
func ParseSelector(s string) (Selector, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	var sel Selector
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || !labelPattern.MatchString(k) || (v != "" && !labelPattern.MatchString(v)) {
			return nil, fmt.Errorf("%q is not a label=value pair", part)
		}
		sel = append(sel, LabelPair{Key: k, Value: v})
	}
	return sel, nil
}

// Matches reports whether labels satisfy every pair of the selector.
func (s Selector) Matches(labels map[string]string) bool {
	for _, p := range s {
		if v, ok := labels[p.Key]; !ok || v != p.Value {
			return false
		}
	}
	return true
}

// MaxFallbackBytes bounds an L1 fallback payload.
const MaxFallbackBytes = 64 << 10

// Switch is the value of switches/<app>/<name> and overrides/<app>/<name>.
// It carries only what an SDK needs to answer.
type Switch struct {
	App   string `json:"app"`
	Name  string `json:"name"`
	Level Level  `json:"level"`
	State string `json:"state"` // "on" or "off"
	// Rollout applies while State is "on".
	Rollout Rollout `json:"rollout"`
	// Fallback is the L1 payload, raw JSON.
	Fallback json.RawMessage `json:"fallback,omitempty"`
	// MaxStaleness is the L2 bound as a Go duration string ("30s").
	MaxStaleness Duration `json:"max_staleness,omitempty"`
	// Verify configures the shadow verification of an L1 or L2 switch's
	// degraded path while it is off; nil: the defaults.
	Verify *Verify `json:"verify,omitempty"`
	// WarmUp is how long an L4 switch's writes take to come back after it
	// turns off: the share let through rises linearly from 0 to all over
	// this period; 0 lets them all back at once.
	WarmUp Duration `json:"warm_up,omitempty"`
	// Version is the console's optimistic-concurrency version.
	Version int64 `json:"version"`
	// ExpiresAt is when an "on" switch is due to be audited or turned off.
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// Validate checks a published switch as an SDK receives it.
func (s *Switch) Validate() error {
	if !ValidApp(s.App) {
		return &FieldError{Field: "app", Msg: "invalid app name"}
	}
	if !ValidName(s.Name) {
		return &FieldError{Field: "name", Msg: "invalid switch name"}
	}
	if !s.Level.Valid() {
		return &FieldError{Field: "level", Msg: "must be one of L1, L2, L3, L4, L5"}
	}
	if s.State != StateOn && s.State != StateOff {
		return &FieldError{Field: "state", Msg: `must be "on" or "off"`}
	}
	if err := s.Rollout.Validate(); err != nil {
		return prefixField("rollout", err)
	}
	if len(s.Fallback) > 0 {
		if len(s.Fallback) > MaxFallbackBytes {
			return &FieldError{Field: "fallback", Msg: "exceeds 64 KiB"}
		}
		if !json.Valid(s.Fallback) {
			return &FieldError{Field: "fallback", Msg: "is not valid JSON"}
		}
	}
	if s.MaxStaleness < 0 {
		return &FieldError{Field: "max_staleness", Msg: "must not be negative"}
	}
	if s.WarmUp < 0 {
		return &FieldError{Field: "warm_up", Msg: "must not be negative"}
	}
	if s.Verify != nil {
		if err := s.Verify.Validate(); err != nil {
			return prefixField("verify", err)
		}
	}
	return nil
}

// Shadow verification defaults and bounds (see Verify).
const (
	DefaultVerifyEvery   = 10 * time.Second
	DefaultVerifyTimeout = time.Second
	MinVerifyEvery       = time.Second
	MaxVerifyTimeout     = 10 * time.Second
	MaxRequiredFields    = 32
	// MaxVerifySchema bounds a switch's verify.schema (bytes of JSON).
	MaxVerifySchema = 16 << 10
)

// Verify configures shadow verification: while an L1 or L2 switch is off,
// SDKs that are asked to (the middleware's Verify option, sdk.Verify)
// compute the degraded answer of a sampled safe request beside the live
// one, compare their shapes and throw the degraded answer away.
type Verify struct {
	// Disabled stops sampling for this switch.
	Disabled bool `json:"disabled,omitempty"`
	// Every is the mean time between samples per instance (a token bucket
	// of one); zero means DefaultVerifyEvery.
	Every Duration `json:"every,omitempty"`
	// Timeout bounds one degraded run; zero means DefaultVerifyTimeout.
	Timeout Duration `json:"timeout,omitempty"`
	// RequiredFields are RFC 6901 JSON pointers the degraded answer must
	// hold whenever the live answer holds them.
	RequiredFields []string `json:"required_fields,omitempty"`
	// Schema is an optional JSON Schema (at most MaxVerifySchema bytes,
	// local $ref only) the degraded answer must satisfy; the console
	// compiles it before storing it (sdk/verifyschema), the SDK once per
	// schema.
	Schema json.RawMessage `json:"schema,omitempty"`
}

// Validate checks the bounds and the pointers; the error names the field
// relative to the verify object ("required_fields[2]").
func (v *Verify) Validate() error {
	if v.Every != 0 && v.Every < Duration(MinVerifyEvery) {
		return &FieldError{Field: "every", Msg: "must be at least 1s (or absent for the 10s default)"}
	}
	if v.Timeout < 0 || v.Timeout > Duration(MaxVerifyTimeout) {
		return &FieldError{Field: "timeout", Msg: "must be between 0 (the 1s default) and 10s"}
	}
	if len(v.RequiredFields) > MaxRequiredFields {
		return &FieldError{Field: "required_fields", Msg: fmt.Sprintf("at most %d pointers", MaxRequiredFields)}
	}
	for i, f := range v.RequiredFields {
		if _, err := ParsePointer(f); err != nil {
			return &FieldError{Field: fmt.Sprintf("required_fields[%d]", i), Msg: err.Error()}
		}
	}
	if len(v.Schema) > MaxVerifySchema {
		return &FieldError{Field: "schema", Msg: fmt.Sprintf("at most %d bytes", MaxVerifySchema)}
	}
	return nil
}

// Period is Every or its default.
func (v *Verify) Period() time.Duration {
	if v == nil || v.Every == 0 {
		return DefaultVerifyEvery
	}
	return v.Every.D()
}

// Limit is Timeout or its default.
func (v *Verify) Limit() time.Duration {
	if v == nil || v.Timeout == 0 {
		return DefaultVerifyTimeout
	}
	return v.Timeout.D()
}

// DecodeSwitch parses and validates a published switch value.
func DecodeSwitch(data []byte) (*Switch, error) {
	var s Switch
	if err := strictUnmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("wire: switch: %w", err)
	}
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("wire: switch: %w", err)
	}
	return &s, nil
}

// Limit rule kinds.
const (
	KindTokenBucket   = "token_bucket"
	KindSlidingWindow = "sliding_window"
	KindConcurrency   = "concurrency"
	KindGCRA          = "gcra"
	KindAdaptive      = "adaptive"
	KindBreaker       = "breaker"
	KindThrottle      = "throttle" // client-side adaptive throttling (overload.go)
	KindSystem        = "system"   // adaptive system protection (overload.go)
)

// LimitKinds lists every limit rule kind.
var LimitKinds = []string{KindTokenBucket, KindSlidingWindow, KindConcurrency, KindGCRA, KindAdaptive, KindBreaker, KindThrottle, KindSystem}

// Limit rule modes and scopes.
const (
	ModeEnforce   = "enforce"
	ModeShadow    = "shadow"
	ScopeInstance = "instance"
	ScopeCluster  = "cluster"
)

// KeyBy says where a per-key limiter takes its key from.
type KeyBy struct {
	// Source is "header" (an HTTP header or gRPC metadata key) or "context"
	// (a key set with the SDK's WithKey). Empty means one shared state.
	Source string `json:"source,omitempty"`
	// Name is the header name for Source "header".
	Name string `json:"name,omitempty"`
	// MaxKeys bounds how many keys keep state at once (default 10,000).
	MaxKeys int `json:"max_keys,omitempty"`
	// TTL drops a key's state after it has been idle this long (default 10m).
	TTL Duration `json:"ttl,omitempty"`
}

// LimitRule is the value of limits/<app>/<resource>. Only the parameters of
// its Kind are set.
type LimitRule struct {
	App      string `json:"app"`
	Resource string `json:"resource"`
	Kind     string `json:"kind"`
	Mode     string `json:"mode"`  // "enforce" or "shadow"
	Scope    string `json:"scope"` // "instance" or "cluster"
	KeyBy    KeyBy  `json:"key_by,omitzero"`
	Version  int64  `json:"version"`

	// token_bucket and gcra: requests per second.
	Rate float64 `json:"rate,omitempty"`
	// token_bucket: bucket size.
	Burst int `json:"burst,omitempty"`
	// sliding_window: requests per Window.
	Limit  int      `json:"limit,omitempty"`
	Window Duration `json:"window,omitempty"` // sliding_window, adaptive and breaker window
	// concurrency: maximum in flight.
	Max int `json:"max,omitempty"` // concurrency and adaptive upper bound
	// adaptive: lower bound of the concurrency limit.
	Min int `json:"min,omitempty"`
	// gcra: longest a request may be told to wait.
	MaxWait Duration `json:"max_wait,omitempty"`
	// breaker parameters.
	ErrorRate        float64  `json:"error_rate,omitempty"`         // 0–1, trips when reached
	SlowCallRate     float64  `json:"slow_call_rate,omitempty"`     // 0–1, trips when reached
	SlowCallDuration Duration `json:"slow_call_duration,omitempty"` // a call slower than this is slow
	MinRequests      int      `json:"min_requests,omitempty"`       // no trip below this many calls per window
	OpenDuration     Duration `json:"open_duration,omitempty"`      // first open period
	MaxOpenDuration  Duration `json:"max_open_duration,omitempty"`  // cap of the growing open period
	HalfOpenProbes   int      `json:"half_open_probes,omitempty"`   // probes admitted while half-open

	// Overload levers (overload.go).
	Overload
}

// Validate checks a limit rule; the error names every bad field (joined
// FieldErrors, one per field), the overload parameters' with the kind's.
func (r *LimitRule) Validate() error {
	var errs []error
	bad := func(field, msg string) { errs = append(errs, &FieldError{Field: field, Msg: msg}) }
	positive := func(field string, ok bool) {
		if !ok {
			bad(field, "must be greater than 0")
		}
	}
	if !ValidApp(r.App) {
		bad("app", "invalid app name")
	}
	if r.Resource == "" || len(r.Resource) > 200 || !Printable(r.Resource) {
		bad("resource", "must be 1–200 printable characters (no control characters)")
	}
	switch r.Mode {
	case ModeEnforce, ModeShadow:
	default:
		bad("mode", `must be "enforce" or "shadow"`)
	}
	switch r.Scope {
	case ScopeInstance, ScopeCluster:
	default:
		bad("scope", `must be "instance" or "cluster"`)
	}
	switch r.KeyBy.Source {
	case "", "context":
	case "header":
		if r.KeyBy.Name == "" {
			bad("key_by.name", "is required when source is header")
		}
	default:
		bad("key_by.source", `must be "", "header" or "context"`)
	}
	if r.KeyBy.MaxKeys < 0 || r.KeyBy.MaxKeys > 1_000_000 {
		bad("key_by.max_keys", "must be between 1 and 1000000")
	}
	if r.KeyBy.TTL < 0 {
		bad("key_by.ttl", "must be greater than 0")
	}
	if err := r.validateOverload(); err != nil {
		errs = append(errs, err)
	}
	switch r.Kind {
	case KindTokenBucket:
		positive("rate", r.Rate > 0)
		positive("burst", r.Burst > 0)
	case KindSlidingWindow:
		positive("limit", r.Limit > 0)
		positive("window", r.Window > 0)
	case KindConcurrency:
		positive("max", r.Max > 0)
	case KindGCRA:
		positive("rate", r.Rate > 0)
		if r.MaxWait < 0 {
			bad("max_wait", "must not be negative")
		}
	case KindAdaptive:
		positive("min", r.Min > 0)
		positive("max", r.Max > 0)
		if r.Min > 0 && r.Max > 0 && r.Min > r.Max {
			bad("min", "must not exceed max")
		}
		if r.Window != 0 && r.Window < Duration(time.Second) {
			bad("window", "must be at least 1s")
		}
	case KindBreaker:
		if r.ErrorRate < 0 || r.ErrorRate > 1 {
			bad("error_rate", "must be between 0 and 1 (a share of calls, 0.5 = 50 %)")
		}
		if r.SlowCallRate < 0 || r.SlowCallRate > 1 {
			bad("slow_call_rate", "must be between 0 and 1 (a share of calls, 0.5 = 50 %)")
		}
		if r.ErrorRate == 0 && r.SlowCallRate == 0 {
			bad("error_rate", "is required unless slow_call_rate is set: a breaker needs a rate to trip on")
		}
		if r.SlowCallDuration < 0 || (r.SlowCallRate > 0 && r.SlowCallDuration == 0) {
			bad("slow_call_duration", "is required with slow_call_rate, greater than 0")
		}
		positive("min_requests", r.MinRequests > 0)
		positive("window", r.Window > 0)
		positive("open_duration", r.OpenDuration > 0)
		if r.MaxOpenDuration < 0 || (r.MaxOpenDuration != 0 && r.MaxOpenDuration < r.OpenDuration) {
			bad("max_open_duration", "must not be below open_duration")
		}
		positive("half_open_probes", r.HalfOpenProbes > 0)
	case KindThrottle, KindSystem:
		// validateOverload checked them
	default:
		bad("kind", "must be one of "+strings.Join(LimitKinds, ", "))
	}
	return errors.Join(errs...)
}

// DecodeLimitRule parses and validates a published limit rule value.
func DecodeLimitRule(data []byte) (*LimitRule, error) {
	var r LimitRule
	if err := strictUnmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("wire: limit rule: %w", err)
	}
	if err := r.Validate(); err != nil {
		return nil, fmt.Errorf("wire: limit rule: %w", err)
	}
	return &r, nil
}

// Instance is the value of instances/<app>/<instance-id>, written by the SDK
// under a lease so it disappears when the process does.
type Instance struct {
	App             string            `json:"app"`
	InstanceID      string            `json:"instance_id"`
	Labels          map[string]string `json:"labels,omitempty"`
	SDKVersion      string            `json:"sdk_version"`
	AppliedRevision int64             `json:"applied_revision"`
	AppliedAt       time.Time         `json:"applied_at"`
	StartedAt       time.Time         `json:"started_at"`
	// Stats are the counters of SDKs before fleet signals:
	// "fallbacks_served" counts answers given without any published value
	// (environment, code default or off). Kept for older consoles.
	Stats map[string]int64 `json:"stats,omitempty"`
	// ReportInterval is how often the instance reports its signals when
	// they change (absent from older SDKs, which send no Report).
	ReportInterval Duration `json:"report_interval,omitempty"`
	// Report carries the instance's fleet signals; nil from older SDKs.
	Report *Report `json:"report,omitempty"`
}

// MaxReportBytes bounds the JSON of an instance value with its report,
// whatever the number of switches: entries that do not fit wait for the
// next report (Report.Pending counts them).
const MaxReportBytes = 16 << 10

// Report is what an instance tells the console about its traffic. Counters
// are cumulative since the instance started, so a report that is lost or
// superseded loses nothing. A report holds only the entries that changed
// since they were last reported: a switch or rule absent from it has not
// changed (unless Pending says some changes did not fit).
type Report struct {
	// At is when the report was taken, in unix seconds.
	At int64 `json:"at"`
	// Switches are the signals of switches this instance evaluated, by name.
	Switches map[string]SwitchSignal `json:"switches,omitempty"`
	// Limits are the signals of limit rules this instance enforced, by
	// resource.
	Limits map[string]LimitSignal `json:"limits,omitempty"`
	// Pending counts changed entries left for the next report to keep the
	// value within MaxReportBytes.
	Pending int `json:"pending,omitempty"`
}

// ReadGranularity is how far a switch's last read must advance before an
// SDK reports it again for that alone: a LastRead within it of now means
// "read within the last ReadGranularity".
const ReadGranularity = 5 * time.Minute

// SwitchSignal is one switch's signals at one instance.
type SwitchSignal struct {
	// Degraded counts checks answered "on" (degraded), since start.
	Degraded uint64 `json:"d,omitempty"`
	// Fallbacks counts L1 fallback values served (Handle.Fallback), since
	// start.
	Fallbacks uint64 `json:"f,omitempty"`
	// LastRead is when the switch was last checked, in unix seconds; it is
	// coarse (sampled when reports are taken), and a read alone moves it
	// in a report only once it advanced by ReadGranularity.
	LastRead int64 `json:"r,omitempty"`
	// Latency counts the degraded requests the SDK middleware served for
	// this switch per LatencyBuckets bucket (the last one is above every
	// bound), since start; absent when there were none.
	Latency []uint64 `json:"l,omitempty"`
	// Verify is the shadow verification of the switch's degraded path
	// while it is off, since start; nil when nothing was sampled.
	Verify *VerifySignal `json:"v,omitempty"`
}

// MaxVerifyDiffs bounds the differences a VerifySignal carries.
const MaxVerifyDiffs = 8

// VerifySignal counts the shadow runs of one switch's degraded path at one
// instance, since start.
type VerifySignal struct {
	// Match counts degraded answers with the live answer's shape.
	Match uint64 `json:"m,omitempty"`
	// Mismatch counts degraded answers of another shape.
	Mismatch uint64 `json:"x,omitempty"`
	// Error counts degraded runs that panicked or answered 5xx.
	Error uint64 `json:"e,omitempty"`
	// Timeout counts degraded runs abandoned at their timeout.
	Timeout uint64 `json:"t,omitempty"`
	// LastMatch and LastMismatch are when a sample last matched and last
	// did not, in unix seconds.
	LastMatch    int64 `json:"lm,omitempty"`
	LastMismatch int64 `json:"lx,omitempty"`
	// Diffs are the differences of the last mismatch: JSON pointers and
	// types only, never values ("/items: missing", "/total: number,
	// degraded string"), at most MaxVerifyDiffs.
	Diffs []string `json:"dx,omitempty"`
	// Latency counts the degraded runs that finished, per LatencyBuckets
	// bucket.
	Latency []uint64 `json:"l,omitempty"`
}

// Equal reports whether two signals hold the same counts and diffs.
func (v *VerifySignal) Equal(o *VerifySignal) bool {
	if v == nil || o == nil {
		return v == o
	}
	return v.Match == o.Match && v.Mismatch == o.Mismatch && v.Error == o.Error && v.Timeout == o.Timeout &&
		v.LastMatch == o.LastMatch && v.LastMismatch == o.LastMismatch &&
		slices.Equal(v.Diffs, o.Diffs) && slices.Equal(v.Latency, o.Latency)
}

// LatencyBuckets are the upper bounds of the degraded-path latency
// histogram in SwitchSignal.Latency; a final bucket counts slower requests.
var LatencyBuckets = []time.Duration{
	time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond,
	20 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond,
	500 * time.Millisecond, time.Second, 2 * time.Second,
}

// LimitSignal is one limit rule's signals at one instance, since start.
type LimitSignal struct {
	Allowed uint64 `json:"a,omitempty"`
	// Rejected counts requests refused in enforce mode.
	Rejected uint64 `json:"x,omitempty"`
	// ShadowRejected counts requests a shadow-mode rule would have refused.
	ShadowRejected uint64 `json:"s,omitempty"`
	// Breaker is the state of a breaker rule: closed, open or half_open.
	Breaker string `json:"b,omitempty"`
}

// Breaker states in LimitSignal.Breaker.
const (
	BreakerClosed   = "closed"
	BreakerOpen     = "open"
	BreakerHalfOpen = "half_open"
)

// Printable reports whether s holds no control characters (ANSI escapes,
// newlines, NUL …), so it is safe to show in a terminal, a log line or a
// web page.
func Printable(s string) bool {
	for _, r := range s {
		if unicode.IsControl(r) {
			return false
		}
	}
	return utf8.ValidString(s)
}

// FieldError is a validation error naming the offending field.
type FieldError struct {
	Field string `json:"field"`
	Msg   string `json:"message"`
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

func prefixField(prefix string, err error) error {
	var fe *FieldError
	if errors.As(err, &fe) {
		return &FieldError{Field: prefix + "." + fe.Field, Msg: fe.Msg}
	}
	return err
}

// Duration is a time.Duration written as a Go duration string ("30s").
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// MarshalJSON writes the duration as FormatDuration does ("1m30s", "5m").
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(FormatDuration(time.Duration(d)))
}

// FormatDuration writes d as a Go duration string without zero units:
// "72h", "1h30m", "5m", "42s" (time.Duration's String writes 72h0m0s).
// It is the one form every duration is answered in.
func FormatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// UnmarshalJSON reads a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil // as encoding/json leaves a value for null
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return errors.New(`duration must be a string such as "30s"`)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration %q: %w", s, err)
	}
	*d = Duration(v)
	return nil
}

func strictUnmarshal(data []byte, v any) error {
	// Unknown fields are tolerated on the wire so that an older SDK reads a
	// newer console's values; only malformed JSON and invalid values fail.
	return json.Unmarshal(data, v)
}
