package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/switchyard-io/switchyard/sdk/verifyschema"
	"github.com/switchyard-io/switchyard/sdk/wire"
)

// Expiry policies for a switch left on past its max_on.
const (
	ExpiryAutoOff = "auto_off"
	ExpiryRemind  = "remind"
)

// Defaults for new switches.
const (
	DefaultMaxOn        = 72 * time.Hour
	maxReasonLen        = 1000
	maxDescriptionLen   = 2000
	maxShortFieldLen    = 200
	maxMaxOn            = 366 * 24 * time.Hour
	minMaxOn            = time.Minute
	maxWarmUp           = 10 * time.Minute
	defaultRolloutBasis = 10000
)

// Switch is a degradation switch as stored in the database.
type Switch struct {
	Record
	App               string
	Name              string
	Level             wire.Level
	Description       string
	Owner             string
	Runbook           string
	Fallback          string // raw JSON, L1 only
	MaxStaleness      string // Go duration, L2 only
	WarmUp            string // Go duration, L4 only; "" for none
	State             string
	RolloutBasis      int // percent × 100
	RolloutStickiness string
	RolloutSelector   string
	RolloutInclude    string // JSON array of request keys, "" for none
	RolloutExclude    string // JSON array of request keys, "" for none
	Verify            string // JSON wire.Verify of an L1/L2 switch, "" for the defaults
	MaxOn             string // Go duration
	ExpiryPolicy      string
	ExpiresAt         *time.Time
	TurnedOnAt        *time.Time
}

// TableName pins the table name.
func (Switch) TableName() string { return "switches" }

// Target is how the audit log names the switch.
func (s *Switch) Target() string { return "switch/" + s.App + "/" + s.Name }

func (s *Switch) describe() any { return s.View() }

func (*Switch) nameColumn() string { return "name" }

// Rollout returns the rollout as published.
func (s *Switch) Rollout() wire.Rollout {
	return wire.Rollout{
		Percent:    float64(s.RolloutBasis) / 100,
		Stickiness: s.RolloutStickiness,
		Selector:   s.RolloutSelector,
		Include:    keyList(s.RolloutInclude),
		Exclude:    keyList(s.RolloutExclude),
	}
}

// keyList decodes a stored key list; "" (and anything unreadable, which
// validate refuses) is none.
func keyList(stored string) []string {
	var keys []string
	if stored != "" {
		_ = json.Unmarshal([]byte(stored), &keys)
	}
	return keys
}

// storedKeyList is the stored form of a key list: sorted, without
// duplicates, "" when empty.
func storedKeyList(keys []string) string {
	if len(keys) == 0 {
		return ""
	}
	keys = slices.Clone(keys)
	for i := range keys {
		keys[i] = strings.TrimSpace(keys[i])
	}
	slices.Sort(keys)
	b, _ := json.Marshal(slices.Compact(keys))
	return string(b)
}

// VerifySpec returns the shadow verification settings, nil for the
// defaults.
func (s *Switch) VerifySpec() *wire.Verify {
	if s.Verify == "" {
		return nil
	}
	var v wire.Verify
	if json.Unmarshal([]byte(s.Verify), &v) != nil {
		return nil
	}
	return &v
}

// setVerify stores v (nil: the defaults).
func (s *Switch) setVerify(v *wire.Verify) {
	s.Verify = ""
	if v != nil {
		b, _ := json.Marshal(v)
		s.Verify = string(b)
	}
}

// setRollout validates r and stores it; the error names the rollout field.
func (s *Switch) setRollout(r wire.Rollout) error {
	var v FieldErrors
	v.AddErr("rollout", r.Validate())
	if err := v.Err(); err != nil {
		return err
	}
	s.RolloutBasis = r.Basis()
	s.RolloutStickiness = r.Stickiness
	if s.RolloutStickiness == "" {
		s.RolloutStickiness = wire.StickyInstance
	}
	s.RolloutSelector = strings.TrimSpace(r.Selector)
	s.RolloutInclude, s.RolloutExclude = storedKeyList(r.Include), storedKeyList(r.Exclude)
	return nil
}

// turnOn sets the state on. Turning on an off switch records the on-since
// time and starts the expiry clock from max_on; a switch already on keeps
// both (a rollout change is not a renewal).
func (s *Switch) turnOn(now time.Time) {
	if s.State == wire.StateOn {
		return
	}
	s.State, s.TurnedOnAt = wire.StateOn, &now
	if d, err := ParseDuration(s.MaxOn); err == nil {
		exp := now.Add(d)
		s.ExpiresAt = &exp
	}
}

func (s *Switch) turnOff() { s.State, s.ExpiresAt, s.TurnedOnAt = wire.StateOff, nil, nil }

// SwitchState is what a staged change may have to put back exactly: a
// switch's state and rollout and, while it was on, its on-since time and
// expiry.
type SwitchState struct {
	State     string       `json:"state"`
	Rollout   wire.Rollout `json:"rollout"`
	OnSince   *time.Time   `json:"on_since,omitempty"`
	ExpiresAt *time.Time   `json:"expires_at,omitempty"`
}

// Saved returns the switch's current SwitchState.
func (s *Switch) Saved() SwitchState {
	return SwitchState{State: s.State, Rollout: s.Rollout(), OnSince: utcPtr(s.TurnedOnAt), ExpiresAt: utcPtr(s.ExpiresAt)}
}

// Wire returns the value published to etcd: only what an SDK needs.
func (s *Switch) Wire() *wire.Switch {
	w := &wire.Switch{
		App:       s.App,
		Name:      s.Name,
		Level:     s.Level,
		State:     s.State,
		Rollout:   s.Rollout(),
		Version:   s.Version,
		ExpiresAt: utcPtr(s.ExpiresAt),
	}
	if s.Fallback != "" {
		w.Fallback = json.RawMessage(s.Fallback)
	}
	if d, err := ParseDuration(s.MaxStaleness); err == nil {
		w.MaxStaleness = wire.Duration(d)
	}
	if d, err := ParseDuration(s.WarmUp); err == nil {
		w.WarmUp = wire.Duration(d)
	}
	w.Verify = s.VerifySpec()
	return w
}

// SwitchView is the API representation of a switch.
type SwitchView struct {
	App          string          `json:"app"`
	Name         string          `json:"name"`
	Level        wire.Level      `json:"level"`
	LevelName    string          `json:"level_name"`
	Description  string          `json:"description"`
	Owner        string          `json:"owner"`
	Runbook      string          `json:"runbook"`
	Fallback     json.RawMessage `json:"fallback,omitempty"`
	MaxStaleness string          `json:"max_staleness,omitempty"`
	WarmUp       string          `json:"warm_up,omitempty"`
	Verify       *wire.Verify    `json:"verify,omitempty"`
	State        string          `json:"state"`
	Rollout      wire.Rollout    `json:"rollout"`
	MaxOn        string          `json:"max_on"`
	ExpiryPolicy string          `json:"expiry_policy"`
	ExpiresAt    *time.Time      `json:"expires_at"`
	OnSince      *time.Time      `json:"on_since"`
	Version      int64           `json:"version"`
	Reason       string          `json:"reason"`
	UpdatedBy    string          `json:"updated_by"`
	UpdatedAt    time.Time       `json:"updated_at"`
	CreatedAt    time.Time       `json:"created_at"`
}

// View returns the API representation.
func (s *Switch) View() SwitchView {
	v := SwitchView{
		App: s.App, Name: s.Name, Level: s.Level, LevelName: s.Level.Label(),
		Description: s.Description, Owner: s.Owner, Runbook: s.Runbook,
		MaxStaleness: CanonicalDuration(s.MaxStaleness), WarmUp: CanonicalDuration(s.WarmUp),
		Verify: s.VerifySpec(), State: s.State, Rollout: s.Rollout(),
		MaxOn: CanonicalDuration(s.MaxOn), ExpiryPolicy: s.ExpiryPolicy, ExpiresAt: utcPtr(s.ExpiresAt),
		OnSince: utcPtr(s.TurnedOnAt), Version: s.Version, Reason: s.Reason,
		UpdatedBy: s.UpdatedBy, UpdatedAt: s.UpdatedAt.UTC(), CreatedAt: s.CreatedAt.UTC(),
	}
	if s.Fallback != "" {
		v.Fallback = json.RawMessage(s.Fallback)
	}
	return v
}

// SwitchInput creates a switch.
type SwitchInput struct {
	Name         string          `json:"name"`
	Level        wire.Level      `json:"level"`
	Description  string          `json:"description"`
	Owner        string          `json:"owner"`
	Runbook      string          `json:"runbook"`
	Fallback     json.RawMessage `json:"fallback"`
	MaxStaleness string          `json:"max_staleness"`
	WarmUp       string          `json:"warm_up"`
	Verify       *wire.Verify    `json:"verify"`
	Rollout      *wire.Rollout   `json:"rollout"`
	MaxOn        string          `json:"max_on"`
	ExpiryPolicy string          `json:"expiry_policy"`
	Reason       string          `json:"reason"`
}

// SwitchPatch changes some fields of a switch. Its JSON form is an
// RFC 7396 merge patch over the switch's fields as the API shows them
// (Patch): null puts an optional field back to its default. Go callers
// may set the typed fields instead, each non-nil one a member of the
// patch.
type SwitchPatch struct {
	Version      *int64           `json:"version"`
	Reason       string           `json:"reason"`
	Level        *wire.Level      `json:"level"`
	Description  *string          `json:"description"`
	Owner        *string          `json:"owner"`
	Runbook      *string          `json:"runbook"`
	Fallback     *json.RawMessage `json:"fallback"`
	MaxStaleness *string          `json:"max_staleness"`
	WarmUp       *string          `json:"warm_up"`
	Verify       *wire.Verify     `json:"verify"`
	Rollout      *wire.Rollout    `json:"rollout"`
	MaxOn        *string          `json:"max_on"`
	ExpiryPolicy *string          `json:"expiry_policy"`

	merge json.RawMessage // the merge patch a JSON body gave
}

// UnmarshalJSON takes a merge patch.
func (p *SwitchPatch) UnmarshalJSON(b []byte) error {
	var mp Patch
	if err := json.Unmarshal(b, &mp); err != nil {
		return err
	}
	*p = SwitchPatch{Version: mp.Version, Reason: mp.Reason, merge: mp.Fields}
	return nil
}

// patch is the merge patch p stands for.
func (p *SwitchPatch) patch() Patch {
	if p.merge != nil {
		return Patch{Fields: p.merge}
	}
	return PatchOf(map[string]any{
		"level": p.Level, "description": p.Description, "owner": p.Owner, "runbook": p.Runbook,
		"fallback": p.Fallback, "max_staleness": p.MaxStaleness, "warm_up": p.WarmUp, "verify": p.Verify, "rollout": p.Rollout,
		"max_on": p.MaxOn, "expiry_policy": p.ExpiryPolicy,
	})
}

// Toggle turns a switch on or off.
type Toggle struct {
	Reason  string        `json:"reason"`
	Version *int64        `json:"version"`
	Rollout *wire.Rollout `json:"rollout"`
}

// Change carries the reason and expected version of a change without a body
// of its own (delete).
type Change struct {
	Reason  string `json:"reason"`
	Version *int64 `json:"version"`
}

func newSwitch(app string, in *SwitchInput) (*Switch, error) {
	s := &Switch{
		App: app, Name: in.Name, Level: in.Level,
		Description: strings.TrimSpace(in.Description), Owner: strings.TrimSpace(in.Owner),
		Runbook: strings.TrimSpace(in.Runbook), MaxStaleness: in.MaxStaleness, WarmUp: in.WarmUp,
		State: wire.StateOff, MaxOn: in.MaxOn, ExpiryPolicy: in.ExpiryPolicy,
		RolloutBasis: defaultRolloutBasis, RolloutStickiness: wire.StickyInstance,
	}
	s.Fallback = fallbackString(in.Fallback)
	s.setVerify(in.Verify)
	if in.Rollout != nil {
		if err := s.setRollout(*in.Rollout); err != nil {
			return nil, err
		}
	}
	if s.MaxOn == "" {
		s.MaxOn = ShortDuration(DefaultMaxOn)
	}
	if s.ExpiryPolicy == "" {
		s.ExpiryPolicy = ExpiryRemind
	}
	return s, nil
}

// fields are the fields of s a patch merges over, as the API shows them.
func (s *Switch) fields() SwitchInput {
	r := s.Rollout()
	in := SwitchInput{
		Level: s.Level, Description: s.Description, Owner: s.Owner, Runbook: s.Runbook,
		MaxStaleness: s.MaxStaleness, WarmUp: s.WarmUp, Verify: s.VerifySpec(), Rollout: &r, MaxOn: s.MaxOn, ExpiryPolicy: s.ExpiryPolicy,
	}
	if s.Fallback != "" {
		in.Fallback = json.RawMessage(s.Fallback)
	}
	return in
}

// apply merges the patch over s and sets what it changed; the error
// lists every bad member and every invalid field of the result.
func (p *SwitchPatch) apply(s *Switch) error {
	mp := p.patch()
	var in SwitchInput
	v := mp.Merge(s.fields(), &in)
	if mp.Names("name") {
		v.Add("name", "cannot be changed; create a switch with the new name and delete this one")
	}
	// The fallback is the service's payload, opaque to the console: a
	// patch naming it replaces it whole (null removes it) rather than
	// merging into it member by member.
	if raw, ok := mp.Member("fallback"); ok {
		in.Fallback = nil
		if !bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
			in.Fallback = raw
		}
	}
	// Per-level fields do not outlive a level change.
	if in.Level != wire.L1 && !mp.Names("fallback") {
		in.Fallback = nil
	}
	if in.Level != wire.L2 && !mp.Names("max_staleness") {
		in.MaxStaleness = ""
	}
	if in.Level != wire.L4 && !mp.Names("warm_up") {
		in.WarmUp = ""
	}
	if in.Level != wire.L1 && in.Level != wire.L2 && !mp.Names("verify") {
		in.Verify = nil
	}
	rollout := in.Rollout
	in.Rollout = nil
	next, _ := newSwitch(s.App, &in) // without a rollout it cannot fail
	s.Level, s.Description, s.Owner, s.Runbook = next.Level, next.Description, next.Owner, next.Runbook
	s.Fallback, s.MaxStaleness, s.MaxOn, s.ExpiryPolicy = next.Fallback, next.MaxStaleness, next.MaxOn, next.ExpiryPolicy
	s.WarmUp, s.Verify = next.WarmUp, next.Verify
	s.RolloutBasis, s.RolloutStickiness, s.RolloutSelector = next.RolloutBasis, next.RolloutStickiness, next.RolloutSelector
	s.RolloutInclude, s.RolloutExclude = next.RolloutInclude, next.RolloutExclude
	if rollout != nil {
		v.AddErr("", s.setRollout(*rollout))
	}
	if len(v) > 0 {
		v.AddErr("", s.validate())
	}
	return v.Err()
}

// fallbackString is the stored form of a fallback: JSON null and an absent
// value both mean "no fallback".
func fallbackString(raw json.RawMessage) string {
	if t := strings.TrimSpace(string(raw)); t != "null" {
		return t
	}
	return ""
}

// validate checks every field of s; the error names each bad field.
func (s *Switch) validate() error {
	var v FieldErrors
	if !wire.ValidApp(s.App) {
		v.Add("app", "must match ^[a-z0-9][a-z0-9._-]{0,62}$")
	}
	if !wire.ValidName(s.Name) {
		v.Add("name", "must match ^[a-z0-9][a-z0-9._-]{0,62}$")
	}
	if !s.Level.Valid() {
		v.Add("level", "must be one of L1, L2, L3, L4, L5")
	}
	validateText(&v, "description", s.Description, maxDescriptionLen)
	validateText(&v, "owner", s.Owner, maxShortFieldLen)
	if s.Runbook != "" && (!validRunbook(s.Runbook) || !wire.Printable(s.Runbook)) {
		v.Add("runbook", "must be an http(s) URL or a runbooks/ path")
	}
	switch {
	case s.Fallback == "" && s.Level == wire.L1:
		v.Add("fallback", "is required for level L1")
	case s.Fallback != "" && s.Level.Valid() && s.Level != wire.L1:
		v.Add("fallback", "is only allowed for level L1")
	case len(s.Fallback) > wire.MaxFallbackBytes:
		v.Add("fallback", "must be at most 64 KiB")
	case s.Fallback != "" && !json.Valid([]byte(s.Fallback)):
		v.Add("fallback", "must be valid JSON")
	}
	switch d, err := ParseDuration(s.MaxStaleness); {
	case s.MaxStaleness == "" && s.Level == wire.L2:
		v.Add("max_staleness", "is required for level L2")
	case s.MaxStaleness != "" && s.Level.Valid() && s.Level != wire.L2:
		v.Add("max_staleness", "is only allowed for level L2")
	case s.MaxStaleness != "" && (err != nil || d <= 0):
		v.Add("max_staleness", `must be a positive duration such as "30s"`)
	}
	// L5 writes are accepted (queued) while the switch is on, so its off
	// sends no held-back clients at once: only L4 warms up.
	switch d, err := ParseDuration(s.WarmUp); {
	case s.WarmUp != "" && s.Level.Valid() && s.Level != wire.L4:
		v.Add("warm_up", "is only allowed for level L4 (an L5 switch accepts writes while on: its off releases no held-back clients)")
	case s.WarmUp != "" && (err != nil || d < time.Second || d > maxWarmUp):
		v.Add("warm_up", `must be a duration between 1s and 10m, such as "30s"; leave it out for none`)
	}
	v.AddErr("rollout", s.Rollout().Validate())
	if s.Verify != "" {
		var spec wire.Verify
		switch {
		case json.Unmarshal([]byte(s.Verify), &spec) != nil:
			v.Add("verify", "must be an object")
		case s.Level.Valid() && s.Level != wire.L1 && s.Level != wire.L2:
			v.Add("verify", "is only allowed for levels L1 and L2 (only a fallback or stale answer has a shape to verify)")
		case spec.Validate() != nil:
			v.AddErr("verify", spec.Validate())
		case len(spec.Schema) > 0:
			if _, err := verifyschema.Compile(spec.Schema); err != nil {
				v.Add("verify.schema", err.Error())
			}
		}
	}
	if d, err := ParseDuration(s.MaxOn); err != nil || d < minMaxOn || d > maxMaxOn {
		v.Add("max_on", `must be a duration between 1m and 366d (8784h), such as "24h" or "7d"`)
	}
	if s.ExpiryPolicy != ExpiryAutoOff && s.ExpiryPolicy != ExpiryRemind {
		v.Add("expiry_policy", `must be "auto_off" or "remind"`)
	}
	return v.Err()
}

func validRunbook(s string) bool {
	if strings.HasPrefix(s, "runbooks/") {
		return !strings.Contains(s, "..") && len(s) <= 500
	}
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != "" && len(s) <= 500
}

// validateReason checks the mandatory reason of every change.
func validateReason(reason string) error {
	if strings.TrimSpace(reason) == "" {
		return invalid("reason", "is required: say why you make this change")
	}
	var v FieldErrors
	validateText(&v, "reason", strings.TrimSpace(reason), maxReasonLen)
	return v.Err()
}

// validateText checks free text shown to people (in the audit log, a
// terminal, a page): at most max bytes and no control characters, which
// could rewrite a terminal or forge a log line.
func validateText(v *FieldErrors, field, s string, max int) {
	switch {
	case len(s) > max:
		v.Add(field, fmt.Sprintf("must be at most %d characters", max))
	case !wire.Printable(s):
		v.Add(field, "must not contain control characters (newlines, tabs, escape sequences)")
	}
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
