// Package expiry keeps switches from staying on forgotten. Every switch
// that is on has an expires_at (turned on + max_on); the leader's expiry
// job acts on it through the audited change path: a switch with policy
// auto_off is turned off at its expiry (actor kind "expiry"); one with
// policy remind gets an expired_on finding and a notification, and an
// escalation if nobody renews or turns it off in time. Both are reminded
// ahead of their expiry. Renewing (a person confirming the switch stays
// on, with a reason) moves the expiry by max_on and resolves the findings.
//
// The decision is a pure function (Decide) of the switch, the job's
// progress on its current expiry and the time; the job around it loads
// and stores that progress in the database, in the transaction of the
// action, so a new leader neither repeats nor skips one.
package expiry

import (
	"fmt"
	"time"

	"github.com/switchyard-io/switchyard/server"
)

// Config configures expiry; zero RemindBefore or EscalateAfter turns that
// part off.
type Config struct {
	// Every is the period of the expiry and findings jobs (default 10s).
	Every time.Duration
	// RemindBefore is how long before its expiry a switch is reminded of
	// (at most half its max_on, so a short max_on is not reminded at once).
	RemindBefore time.Duration
	// EscalateAfter is how long an expired switch of policy remind may
	// stay unconfirmed before the escalation.
	EscalateAfter time.Duration
}

func (c *Config) defaults() {
	if c.Every <= 0 {
		c.Every = 10 * time.Second
	}
}

// Switch is what Decide needs of a switch.
type Switch struct {
	On        bool
	Policy    string // server.ExpiryAutoOff or server.ExpiryRemind
	MaxOn     time.Duration
	ExpiresAt *time.Time
}

// State is the job's progress on one expiry of one switch.
type State struct {
	ExpiresAt   time.Time // the expiry this progress is about
	RemindedAt  *time.Time
	ExpiredAt   *time.Time
	EscalatedAt *time.Time
}

// empty reports whether nothing has happened yet for the expiry.
func (s *State) empty() bool {
	return s == nil || (s.RemindedAt == nil && s.ExpiredAt == nil && s.EscalatedAt == nil)
}

// Action is what the job does for a switch in one step; the zero Action
// does nothing.
type Action struct {
	// Resolve resolves the findings of an earlier expiry, saying why (the
	// switch is off, deleted, or its expiry moved).
	Resolve string
	// Remind opens expiry_reminder and notifies, ahead of the expiry.
	Remind bool
	// Expire opens expired_on and notifies (policy remind).
	Expire bool
	// Escalate raises expired_on to critical and notifies the escalation.
	Escalate bool
	// TurnOff turns the switch off (policy auto_off).
	TurnOff bool
}

// None reports whether the action does nothing.
func (a Action) None() bool { return a == Action{} }

// Decide is the expiry decision for a switch (nil: deleted) given the
// job's progress st on it (nil: none) at now. It returns the progress to
// keep (nil: none) and what to do.
func Decide(sw *Switch, st *State, now time.Time, cfg Config) (*State, Action) {
	if sw == nil || !sw.On || sw.ExpiresAt == nil {
		if st == nil {
			return nil, Action{}
		}
		why := "the switch is off"
		if sw == nil {
			why = "the switch was deleted"
		}
		return nil, Action{Resolve: why}
	}
	var act Action
	exp := sw.ExpiresAt.UTC()
	if st != nil && !st.ExpiresAt.Equal(exp) {
		act.Resolve = "its expiry moved to " + exp.Format(time.RFC3339)
		st = nil
	}
	next := State{ExpiresAt: exp}
	if st != nil {
		next = *st
	}
	switch {
	case !now.Before(exp) && sw.Policy == server.ExpiryAutoOff:
		act.TurnOff = true
		return nil, act
	case !now.Before(exp) && next.ExpiredAt == nil:
		act.Expire, next.ExpiredAt = true, &now
	case !now.Before(exp):
		if cfg.EscalateAfter > 0 && next.EscalatedAt == nil && now.Sub(*next.ExpiredAt) >= cfg.EscalateAfter {
			act.Escalate, next.EscalatedAt = true, &now
		}
	case next.RemindedAt == nil && cfg.RemindBefore > 0 && !now.Before(exp.Add(-RemindLead(sw.MaxOn, cfg))):
		act.Remind, next.RemindedAt = true, &now
	}
	return &next, act
}

// RemindLead is how long before its expiry a switch of max_on maxOn is
// reminded of: RemindBefore, but at most half of max_on.
func RemindLead(maxOn time.Duration, cfg Config) time.Duration {
	if maxOn > 0 {
		return min(cfg.RemindBefore, maxOn/2)
	}
	return cfg.RemindBefore
}

// OnFor says how long, coarsely: "45m", "3h 5m", "30 days", "4d 2h".
func OnFor(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh %dm", int(d.Hours()), int(d.Minutes())%60)
	case d%(24*time.Hour) < time.Hour:
		return fmt.Sprintf("%d days", int(d.Hours())/24)
	}
	return fmt.Sprintf("%dd %dh", int(d.Hours())/24, int(d.Hours())%24)
}
