// Package policy is the approval policy: one pure function, Decide, of a
// change (its kind, level, from → to, app, actor, break-glass) and the
// app's policy, answering apply now, needs N approvals, or refuse. It
// reads nothing and writes nothing; the change path (package server) asks
// it about every change of every actor, so there is no side door.
package policy

import (
	"fmt"
	"slices"
	"strings"
)

// Rule names a kind of change a protected app may hold for approval.
type Rule string

// The rules. A switch turned on is named with its level; a limit rule is
// "raised" when it lets more through than before (a higher rate, burst,
// limit or maximum, a shorter window, enforce → shadow, turned off, or
// another kind).
const (
	SwitchOnL1    Rule = "switch.on:L1"
	SwitchOnL2    Rule = "switch.on:L2"
	SwitchOnL3    Rule = "switch.on:L3"
	SwitchOnL4    Rule = "switch.on:L4"
	SwitchOnL5    Rule = "switch.on:L5"
	SwitchDelete  Rule = "switch.delete"
	LimitRaise    Rule = "limit.raise"
	LimitDelete   Rule = "limit.delete"
	TriggerCreate Rule = "trigger.create"
	TriggerUpdate Rule = "trigger.update"
	DrillCreate   Rule = "drill.create"
	DrillUpdate   Rule = "drill.update"
)

// Rules lists every rule a policy may name. Turning a switch off, or a
// limit rule on, is never held: recovering and protecting stay one call.
var Rules = []Rule{
	SwitchOnL1, SwitchOnL2, SwitchOnL3, SwitchOnL4, SwitchOnL5, SwitchDelete,
	LimitRaise, LimitDelete, TriggerCreate, TriggerUpdate, DrillCreate, DrillUpdate,
}

// DefaultRules are what a protected app holds unless its policy says
// otherwise: what hurts (L4 and L5 on, raising or deleting a limit rule,
// deleting a switch, new or changed automation). Turning on L1–L3 and
// every turn-off apply at once.
var DefaultRules = []Rule{SwitchOnL4, SwitchOnL5, SwitchDelete, LimitRaise, LimitDelete, TriggerCreate, TriggerUpdate, DrillCreate, DrillUpdate}

// Policy is one app's approval policy. The zero value protects nothing.
type Policy struct {
	// Protected turns the policy on for the app.
	Protected bool
	// Approvals is how many people other than the author must approve a
	// held change (at least 1).
	Approvals int
	// Rules are the kinds of change held (nil: DefaultRules).
	Rules []Rule
	// NoBreakGlass refuses the break-glass bypass on this app.
	NoBreakGlass bool
}

// Held returns the rules p holds.
func (p Policy) Held() []Rule {
	if p.Rules == nil {
		return DefaultRules
	}
	return p.Rules
}

// Validate checks a policy; the error names the field.
func (p Policy) Validate() map[string]string {
	bad := map[string]string{}
	if p.Protected && (p.Approvals < 1 || p.Approvals > 5) {
		bad["approvals"] = "must be between 1 and 5"
	}
	for i, r := range p.Rules {
		if !slices.Contains(Rules, r) {
			bad[fmt.Sprintf("rules[%d]", i)] = "must be one of " + joinRules(Rules)
		}
	}
	return bad
}

func joinRules(rs []Rule) string {
	s := make([]string, len(rs))
	for i, r := range rs {
		s[i] = string(r)
	}
	return strings.Join(s, ", ")
}

// Change is what the change path asks about.
type Change struct {
	// Kind is the entity and verb: "switch.on", "switch.off",
	// "switch.update", "switch.create", "switch.delete", "limit.create",
	// "limit.update", "limit.on", "limit.off", "limit.delete",
	// "trigger.create", "trigger.update", "drill.create", "drill.update",
	// "rollout.create" (a staged plan; To "on" when it turns its switch on).
	Kind string
	// Level is the switch's level after the change (L1…L5).
	Level string
	// From and To are the states before and after ("on", "off"; "" when
	// absent).
	From, To string
	// Loosens: a limit rule lets more through after the change.
	Loosens bool
	App     string
	// Person is true for a user or an API token; false for the console's
	// jobs (trigger, drill, rollout, expiry) and bookkeeping.
	Person bool
	// Cause names what a job acts for ("trigger/checkout/cpu-high").
	Cause string
	// BreakGlass asks to apply at once although the policy holds it.
	BreakGlass bool
}

// Outcome is what Decide answers.
type Outcome int

// Outcomes.
const (
	Apply Outcome = iota
	NeedsApproval
	Refuse
)

func (o Outcome) String() string {
	return [...]string{"apply", "needs_approval", "refuse"}[o]
}

// Decision is Decide's answer.
type Decision struct {
	Outcome Outcome
	// Approvals is how many approvals a held change needs.
	Approvals int
	// Rule is the rule that holds the change ("" when none does).
	Rule Rule
	// BreakGlass marks a held change applied through the bypass: the
	// caller audits it as such, notifies and opens a review.
	BreakGlass bool
	// Why says it in a sentence.
	Why string
}

// Rule returns the rule that names c ("" when no rule can hold it).
func (c Change) Rule() Rule {
	switch c.Kind {
	case "switch.on", "switch.update":
		// A switch is engaged when it goes from off to on, or changes
		// level while on; its rule is named with the new level.
		if c.To == "on" && (c.From == "off" || c.Kind == "switch.update") {
			return Rule("switch.on:" + c.Level)
		}
	case "rollout.create":
		// A staged plan that turns its switch on engages it.
		if c.To == "on" {
			return Rule("switch.on:" + c.Level)
		}
	case "switch.delete":
		return SwitchDelete
	case "limit.update", "limit.off":
		if c.Loosens {
			return LimitRaise
		}
	case "limit.delete":
		return LimitDelete
	case "trigger.create", "trigger.update", "drill.create", "drill.update":
		return Rule(c.Kind)
	}
	return ""
}

// Decide applies policy p of c.App to c. Automation acts under the
// approval its rule, plan or drill got when it was created or changed,
// so its changes apply; a person's change that p holds needs p.Approvals
// approvals unless it is a break-glass, which applies (marked) where p
// allows it and is refused where it does not.
func Decide(p Policy, c Change) Decision {
	r := c.Rule()
	switch {
	case !c.Person:
		return Decision{Outcome: Apply, Why: "automation acts under the approval of " + cmpOr(c.Cause, "its definition")}
	case !p.Protected:
		return Decision{Outcome: Apply, Why: c.App + " is not protected"}
	case r == "" || !slices.Contains(p.Held(), r):
		return Decision{Outcome: Apply, Why: "the policy of " + c.App + " does not hold " + cmpOr(string(r), c.Kind)}
	case c.BreakGlass && p.NoBreakGlass:
		return Decision{Outcome: Refuse, Rule: r, Why: "break-glass is off for " + c.App + "; ask for an approval"}
	case c.BreakGlass:
		return Decision{Outcome: Apply, Rule: r, BreakGlass: true, Why: "break-glass: " + string(r) + " on " + c.App + " applied without approval"}
	}
	n := max(p.Approvals, 1)
	return Decision{Outcome: NeedsApproval, Approvals: n, Rule: r, Why: fmt.Sprintf("%s on %s needs %d approval(s) by another person", r, c.App, n)}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
