package server

import (
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
type LimitInput struct {
	wire.LimitRule
	// HalfOpenProbes tells an absent half_open_probes (nil: the default)
	// from an explicit one, which must be in range (0 is refused); it
	// shadows the rule's member of the same name in JSON.
	HalfOpenProbes *int   `json:"half_open_probes,omitempty"`
	Description    string `json:"description"`
	Reason         string `json:"reason"`
}

// rule returns the rule to create: the input's, with half_open_probes
// taken from the JSON member when given and defaulted for a breaker when
// absent.
func (in *LimitInput) rule() wire.LimitRule {
	r := in.LimitRule
	switch {
	case in.HalfOpenProbes != nil:
		r.HalfOpenProbes = *in.HalfOpenProbes
	case r.Kind == wire.KindBreaker && r.HalfOpenProbes == 0:
		r.HalfOpenProbes = DefaultHalfOpenProbes
	}
	return r
}

// LimitPatch replaces some top-level fields of a rule. Fields holds the raw
// JSON members other than version, reason and description, merged over the
// current rule.
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
	for k, v := range p.Fields {
		m[k] = v
	}
	merged, _ := json.Marshal(m)
	var out LimitInput
	errs := DecodeJSON(merged, &out)
	r := out.rule()
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
	if v.Err() == nil {
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
