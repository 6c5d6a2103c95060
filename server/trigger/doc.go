// Package trigger is the console's auto-triggers: rules that turn a switch
// on when a metric crosses a trigger threshold for a sustained time and
// off only when it is past a separate recover threshold for a sustained
// time (hysteresis), with a cooldown after each flip, a cap on time on
// (then the switch is handed to a person), a missing-data policy, an
// optional human confirmation before recovery, and flap detection that
// locks the rule and alerts.
//
// The evaluator (eval.go) is a pure function of the rule's policy, its
// state, one sample (a value, no data, or an error) and the time; the
// leader's Job queries each rule's metric source, runs it, and acts
// through the console's audited change path as actor "trigger" with cause
// trigger/<app>/<rule>, in one fenced transaction per rule that also
// stores the state — so a new leader resumes a hold where the old one
// was, and no flip is applied twice. A person's change to a switch pauses
// its rules (OnPersonChange) until a person resumes them.
//
// The package must not write the switch table itself, nor read a clock:
// time is an argument of every evaluation.
package trigger
