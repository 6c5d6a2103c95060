package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/switchyard-io/switchyard/sdk/wire"
)

// LimitRule is a limit rule as stored in the database. Spec holds the
// kind-specific parameters and options as the JSON of a wire.LimitRule.
type LimitRule struct {
	Record
	App         string
	Resource    string
	Kind        string
	State       string // "on": published and enforced; "off": withdrawn
	Spec        string
	Description string
}

// TableName pins the table name.
func (LimitRule) TableName() string { return "limit_rules" }

// Target is how the audit log names the rule.
func (r *LimitRule) Target() string { return "limit/" + r.App + "/" + r.Resource }

func (r *LimitRule) describe() any { return r.View() }

func (*LimitRule) nameColumn() string { return "resource" }

// validate checks the stored parameters and description.
func (r *LimitRule) validate() error {
	var v FieldErrors
	validateText(&v, "description", r.Description, maxDescriptionLen)
	if err := v.Err(); err != nil {
		return err
	}
	return validateLimit(r.Wire())
}

// Wire returns the value published to etcd.
func (r *LimitRule) Wire() *wire.LimitRule {
	var w wire.LimitRule
	_ = json.Unmarshal([]byte(r.Spec), &w) // Spec was validated when written
	w.App, w.Resource, w.Kind, w.Version = r.App, r.Resource, r.Kind, r.Version
	return &w
}

// LimitView is the API representation of a limit rule: the published rule
// plus bookkeeping.
type LimitView struct {
	*wire.LimitRule
	State       string    `json:"state"`
	Description string    `json:"description"`
	Reason      string    `json:"reason"`
	UpdatedBy   string    `json:"updated_by"`
	UpdatedAt   time.Time `json:"updated_at"`
	CreatedAt   time.Time `json:"created_at"`
}

// View returns the API representation.
func (r *LimitRule) View() LimitView {
	return LimitView{
		LimitRule: r.Wire(), State: r.State, Description: r.Description, Reason: r.Reason,
		UpdatedBy: r.UpdatedBy, UpdatedAt: r.UpdatedAt.UTC(), CreatedAt: r.CreatedAt.UTC(),
	}
}

// LimitInput creates a limit rule: the rule's fields (resource, kind,
// parameters, mode, scope, key_by) plus description and reason.
//
// The parameters whose zero means "the default" are pointers shadowing the
// rule's members of the same JSON name, to tell an absent member (the
// default) from an explicit one, which must be in range: an explicit 0 is
// refused, never replaced by the default.
type LimitInput struct {
	wire.LimitRule
	HalfOpenProbes  *int           `json:"half_open_probes,omitempty"`
	Window          *wire.Duration `json:"window,omitempty"`
	MaxOpenDuration *wire.Duration `json:"max_open_duration,omitempty"`
	MinRequests     *int           `json:"min_requests,omitempty"`
	K               *float64       `json:"k,omitempty"`
	CPU             *float64       `json:"cpu,omitempty"`
	Cooldown        *wire.Duration `json:"cooldown,omitempty"`
	QueueInterval   *wire.Duration `json:"queue_interval,omitempty"`
	KeyBy           *keyByInput    `json:"key_by,omitempty"`
	Description     string         `json:"description"`
	Reason          string         `json:"reason"`
}

// keyByInput is wire.KeyBy with its defaulted bounds as pointers.
type keyByInput struct {
	Source  string         `json:"source,omitempty"`
	Name    string         `json:"name,omitempty"`
	MaxKeys *int           `json:"max_keys,omitempty"`
	TTL     *wire.Duration `json:"ttl,omitempty"`
}

// rule returns the rule to create — the input's, with the shadowed members
// taken from the JSON when given and half_open_probes defaulted for a
// breaker when absent — and the errors of explicit values that only an
// absent member may have.
func (in *LimitInput) rule() (wire.LimitRule, FieldErrors) {
	r := in.LimitRule
	var v FieldErrors
	// explicit checks a member given explicitly: 0 or less is refused,
	// naming what leaving it out means (absent; "" where the kind has no
	// default and Validate says what is wrong), and a member the kind does
	// not take is refused as such.
	explicit := func(field string, positive bool, absent string) {
		switch {
		case positive:
		case !strings.HasPrefix(field, "key_by.") && !slices.Contains(kindParams[r.Kind], field):
			v.Addf(field, "is not a parameter of kind %s (it takes %s)", r.Kind, strings.Join(kindParams[r.Kind], ", "))
		case absent != "":
			v.Addf(field, "must be greater than 0 (leave it out for %s)", absent)
		}
	}
	// defaulted is absent when kind defaults field, "" when it requires it.
	defaulted := func(absent string, kinds ...string) string {
		if slices.Contains(kinds, r.Kind) {
			return absent
		}
		return ""
	}
	duration := func(field string, p *wire.Duration, dst *wire.Duration, absent string) {
		if p != nil {
			*dst = *p
			explicit(field, *p > 0, absent)
		}
	}
	if in.HalfOpenProbes != nil {
		r.HalfOpenProbes = *in.HalfOpenProbes
		explicit("half_open_probes", r.HalfOpenProbes > 0, fmt.Sprintf("the default %d", DefaultHalfOpenProbes))
	} else if r.Kind == wire.KindBreaker {
		r.HalfOpenProbes = DefaultHalfOpenProbes
	}
	if in.MinRequests != nil {
		r.MinRequests = *in.MinRequests
		explicit("min_requests", r.MinRequests > 0, defaulted("the default", wire.KindThrottle))
	}
	if in.K != nil {
		r.K = *in.K
		explicit("k", r.K > 0, "the default 2")
	}
	if in.CPU != nil {
		r.CPU = *in.CPU
		explicit("cpu", r.CPU > 0, "the default 0.8")
	}
	duration("window", in.Window, &r.Window, defaulted("the default", wire.KindAdaptive, wire.KindThrottle, wire.KindSystem))
	duration("max_open_duration", in.MaxOpenDuration, &r.MaxOpenDuration, "no growth: every open period lasts open_duration")
	duration("cooldown", in.Cooldown, &r.Cooldown, "the default 1s")
	duration("queue_interval", in.QueueInterval, &r.QueueInterval, "the default 100ms")
	if k := in.KeyBy; k != nil {
		r.KeyBy = wire.KeyBy{Source: k.Source, Name: k.Name}
		if k.MaxKeys != nil {
			r.KeyBy.MaxKeys = *k.MaxKeys
			explicit("key_by.max_keys", r.KeyBy.MaxKeys > 0, "the default 10000")
		}
		duration("key_by.ttl", k.TTL, &r.KeyBy.TTL, "the default 10m")
	}
	return r, v
}

// LimitPatch changes some fields of a rule: its JSON form is an RFC 7396
// merge patch (Patch). Fields holds the members other than version,
// reason and description, merged over the current rule; null puts a
// parameter back to its default, and a description of null clears it.
type LimitPatch struct {
	Version     *int64
	Reason      string
	Description *string
	Fields      map[string]json.RawMessage
}

// UnmarshalJSON splits the bookkeeping members from the rule fields.
func (p *LimitPatch) UnmarshalJSON(b []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	take := func(key string, dst any) error {
		raw, ok := m[key]
		if !ok {
			return nil
		}
		delete(m, key)
		if err := json.Unmarshal(raw, dst); err != nil {
			return &FieldError{Field: key, Msg: "has the wrong type"}
		}
		return nil
	}
	if err := take("version", &p.Version); err != nil {
		return err
	}
	if err := take("reason", &p.Reason); err != nil {
		return err
	}
	if string(bytes.TrimSpace(m["description"])) == "null" {
		m["description"] = json.RawMessage(`""`)
	}
	if err := take("description", &p.Description); err != nil {
		return err
	}
	p.Fields = m
	return nil
}

// MarshalJSON writes the patch as it was sent (UnmarshalJSON's inverse), so
// a change request stores it exactly.
func (p LimitPatch) MarshalJSON() ([]byte, error) {
	m := make(map[string]any, len(p.Fields)+3)
	for k, v := range p.Fields {
		m[k] = v
	}
	if p.Version != nil {
		m["version"] = *p.Version
	}
	m["reason"] = p.Reason
	if p.Description != nil {
		m["description"] = *p.Description
	}
	return json.Marshal(m)
}

// immutableLimitFields cannot change through a patch.
var immutableLimitFields = []string{"app", "resource"}

// merge applies the patch's fields over the current rule, decodes the
// result strictly (an unknown field is refused) and validates it: every
// bad field is reported.
func (p *LimitPatch) merge(cur *wire.LimitRule) (*wire.LimitRule, error) {
	for _, f := range immutableLimitFields {
		if _, ok := p.Fields[f]; ok {
			return nil, invalid(f, "cannot be changed; delete the rule and create a new one")
		}
	}
	var m map[string]json.RawMessage
	b, _ := json.Marshal(cur)
	_ = json.Unmarshal(b, &m)
	kindChanged := false
	if raw, ok := p.Fields["kind"]; ok && string(raw) != string(m["kind"]) {
		kindChanged = true
	}
	if kindChanged {
		// A new kind starts from its own parameters only.
		keep := map[string]json.RawMessage{}
		for _, k := range []string{"app", "resource", "mode", "scope", "key_by", "version"} {
			if v, ok := m[k]; ok {
				keep[k] = v
			}
		}
		m = keep
	}
	doc, _ := json.Marshal(m)
	fields := []byte("{}")
	if len(p.Fields) > 0 {
		fields, _ = json.Marshal(p.Fields)
	}
	var out LimitInput
	errs := DecodeJSON(MergePatch(doc, fields), &out)
	r, explicit := out.rule()
	errs.AddErr("", explicit.Err())
	errs.AddErr("", validateLimit(&r))
	return &r, errs.Err()
}

// DefaultHalfOpenProbes is how many probes a half-open breaker admits when
// the rule does not say: more than one, so a single lucky or unlucky call
// does not decide alone.
const DefaultHalfOpenProbes = 3

// validateLimit normalizes defaults and checks the rule. Numeric
// parameters have their defaults filled in before (LimitInput.rule): here
// an explicit value out of range is an error, never replaced.
func validateLimit(r *wire.LimitRule) error {
	if r.Mode == "" {
		r.Mode = wire.ModeEnforce
	}
	if r.Scope == "" {
		r.Scope = wire.ScopeInstance
	}
	r.Resource = strings.TrimSpace(r.Resource)
	var v FieldErrors
	v.AddErr("", r.Validate())
	if _, known := kindParams[r.Kind]; known {
		for _, f := range foreignParams(r) {
			v.Add(f, fmt.Sprintf("is not a parameter of kind %s (it takes %s)", r.Kind, strings.Join(kindParams[r.Kind], ", ")))
		}
	}
	return v.Err()
}

// kindParams are the parameters each limit kind takes.
var kindParams = map[string][]string{
	wire.KindTokenBucket:   {"rate", "burst", "reserve", "warm_up"},
	wire.KindSlidingWindow: {"limit", "window", "reserve"},
	wire.KindConcurrency:   {"max", "queue_target", "queue_interval", "lifo", "reserve", "warm_up"},
	wire.KindGCRA:          {"rate", "max_wait", "reserve"},
	wire.KindAdaptive:      {"min", "max", "window", "reserve"},
	wire.KindBreaker:       {"error_rate", "slow_call_rate", "slow_call_duration", "min_requests", "window", "open_duration", "max_open_duration", "half_open_probes"},
	wire.KindThrottle:      {"k", "window", "min_requests", "reserve"},
	wire.KindSystem:        {"cpu", "window", "cooldown", "reserve"},
}

// foreignParams names the parameters set on r that its kind does not take:
// they would be stored and published and have no effect. (The console
// refuses them; SDKs still decode rules published before it did.)
func foreignParams(r *wire.LimitRule) []string {
	set := map[string]bool{
		"rate": r.Rate != 0, "burst": r.Burst != 0, "limit": r.Limit != 0, "window": r.Window != 0,
		"max": r.Max != 0, "min": r.Min != 0, "max_wait": r.MaxWait != 0, "error_rate": r.ErrorRate != 0,
		"slow_call_rate": r.SlowCallRate != 0, "slow_call_duration": r.SlowCallDuration != 0,
		"min_requests": r.MinRequests != 0, "open_duration": r.OpenDuration != 0,
		"max_open_duration": r.MaxOpenDuration != 0, "half_open_probes": r.HalfOpenProbes != 0,
		"k": r.K != 0, "cpu": r.CPU != 0, "cooldown": r.Cooldown != 0, "queue_target": r.QueueTarget != 0,
		"queue_interval": r.QueueInterval != 0, "lifo": r.LIFO, "reserve": r.Reserve != 0, "warm_up": r.WarmUp != 0,
	}
	for _, p := range kindParams[r.Kind] {
		delete(set, p)
	}
	var out []string
	for name, on := range set {
		if on {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// spec serializes a validated rule's parameters for storage.
func spec(r *wire.LimitRule) string {
	c := *r
	c.App, c.Version = "", 0
	b, _ := json.Marshal(&c)
	return string(b)
}

// jsonTypeName names a Go type as the JSON a client must send.
func jsonTypeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "of type " + t.String()
}
