package trigger

import (
	"time"

	"github.com/switchyard-io/switchyard/server"
)

// View is the API representation of a rule; Status is its live state.
type View struct {
	App             string        `json:"app"`
	Name            string        `json:"name"`
	Switch          string        `json:"switch"`
	Description     string        `json:"description"`
	Source          string        `json:"source"`
	Query           string        `json:"query"`
	Trigger         CondView      `json:"trigger"`
	Recover         CondView      `json:"recover"`
	Cooldown        string        `json:"cooldown"`
	MaxOn           string        `json:"max_on"`
	OnNoData        string        `json:"on_no_data"`
	OnError         string        `json:"on_error"`
	ConfirmRecovery bool          `json:"confirm_recovery"`
	Flap            FlapView      `json:"flap"`
	Rollout         *RolloutInput `json:"rollout"`
	Mode            string        `json:"mode"`
	Version         int64         `json:"version"`
	Reason          string        `json:"reason"`
	UpdatedBy       string        `json:"updated_by"`
	UpdatedAt       time.Time     `json:"updated_at"`
	CreatedAt       time.Time     `json:"created_at"`
	Status          *Status       `json:"status,omitempty"`
	// Warnings come with the answer to a save: the query has no data now,
	// say. They are not stored.
	Warnings []string `json:"warnings,omitempty"`
}

// CondView is one side of a rule.
type CondView struct {
	Op        Op      `json:"op"`
	Threshold float64 `json:"threshold"`
	For       string  `json:"for"`
}

func (c CondView) String() string {
	return string(c.Op) + " " + formatNum(c.Threshold) + " for " + c.For
}

// Status is a rule's live state: its phase (or paused), since when, whether
// it holds the switch on (in dry run: would), the evidence of a running
// hold, a lock or pause and who made it, and the last sample.
type Status struct {
	State         string      `json:"state"` // the phase, or "paused"
	Phase         Phase       `json:"phase"`
	Since         time.Time   `json:"since"`
	SwitchOn      bool        `json:"switch_on"`
	OnSince       *time.Time  `json:"on_since,omitempty"`
	CooldownUntil *time.Time  `json:"cooldown_until,omitempty"`
	Window        *Window     `json:"window,omitempty"`
	Flips         int         `json:"flips"`
	Lock          string      `json:"lock,omitempty"`
	LockWhy       string      `json:"lock_why,omitempty"`
	Paused        bool        `json:"paused"`
	PausedBy      string      `json:"paused_by,omitempty"`
	PausedAt      *time.Time  `json:"paused_at,omitempty"`
	PauseReason   string      `json:"pause_reason,omitempty"`
	ConfirmedBy   string      `json:"confirmed_by,omitempty"`
	Last          *LastSample `json:"last,omitempty"`
}

// config is the rule's configuration without its state (what the audit
// log records of a create, an update or a delete).
func (r *Rule) config() View {
	v := View{
		App: r.App, Name: r.Name, Switch: r.SwitchName, Description: r.Description, Source: r.Source, Query: r.Query,
		Trigger:  CondView{Op: r.TriggerOp, Threshold: r.TriggerThreshold, For: server.CanonicalDuration(r.TriggerFor)},
		Recover:  CondView{Op: r.RecoverOp, Threshold: r.RecoverThreshold, For: server.CanonicalDuration(r.RecoverFor)},
		Cooldown: server.CanonicalDuration(r.Cooldown), MaxOn: server.CanonicalDuration(r.MaxOn),
		OnNoData: r.OnNoData, OnError: r.OnError, ConfirmRecovery: r.ConfirmRecovery,
		Flap: FlapView{MaxTransitions: r.FlapMaxTransitions, Window: server.CanonicalDuration(r.FlapWindow)}, Mode: r.Mode,
		Version: r.Version, Reason: r.Reason, UpdatedBy: r.UpdatedBy, UpdatedAt: r.UpdatedAt.UTC(), CreatedAt: r.CreatedAt.UTC(),
	}
	switch {
	case r.RolloutTemplate != "":
		v.Rollout = &RolloutInput{Template: r.RolloutTemplate}
	case r.RolloutBasis != nil:
		v.Rollout = &RolloutInput{Percent: float64(*r.RolloutBasis) / basisPerPercent}
	}
	return v
}

// view is the rule with its state.
func (r *Rule) view(row *stateRow, st State) View {
	v := r.config()
	v.Status = status(st, row)
	return v
}

func status(st State, row *stateRow) *Status {
	out := &Status{
		State: st.Status(), Phase: st.Phase, Since: st.Since.UTC(), SwitchOn: st.On, Flips: len(st.Transitions),
		Lock: st.Lock, LockWhy: st.LockWhy, Paused: st.Paused, PausedBy: st.PausedBy, PauseReason: st.PauseReason,
		ConfirmedBy: st.ConfirmedBy, OnSince: timePtr(st.OnSince), CooldownUntil: timePtr(st.CooldownUntil), PausedAt: timePtr(st.PausedAt),
	}
	if pending(st.Phase) || st.Phase == PhaseAwaiting {
		w := st.Window
		out.Window = &w
	}
	if row != nil {
		out.Last = row.last()
	}
	return out
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

// Input returns the rule as a create body would write it.
func (v *View) Input() Input {
	th, rt := v.Trigger.Threshold, v.Recover.Threshold
	flap := FlapInput{MaxTransitions: &v.Flap.MaxTransitions, Window: v.Flap.Window}
	return Input{
		Name: v.Name, Switch: v.Switch, Description: v.Description, Source: v.Source, Query: v.Query,
		Trigger:  CondInput{Op: v.Trigger.Op, Threshold: &th, For: v.Trigger.For},
		Recover:  CondInput{Op: v.Recover.Op, Threshold: &rt, For: v.Recover.For},
		Cooldown: v.Cooldown, MaxOn: v.MaxOn, OnNoData: v.OnNoData, OnError: v.OnError, ConfirmRecovery: v.ConfirmRecovery,
		Flap: &flap, Rollout: v.Rollout, Mode: v.Mode,
	}
}
