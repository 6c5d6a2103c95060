// Package rollout is Switchyard's staged rollouts: a plan that opens a
// switch to a small slice of the fleet, holds, widens, and holds again —
// 1 % → 5 min → 50 % → 5 min → 100 % — or closes it the same way, advanced
// by the scheduler's leader and gated on what the fleet actually applied
// and on health.
//
// A step counts only once the instances it targets acknowledge the switch
// version it set (the convergence gate); its hold is counted from then, not
// from the write; health conditions on the metric sources (fleet or
// Prometheus) are measured through the hold, and "no data" is its own
// outcome, never a pass. A failed gate reverts the switch exactly as it
// was before the plan, or pauses the plan. A person's change to the switch
// pauses the plan in the same transaction: people win.
//
// The decisions are pure functions of (plan, progress, observation, now)
// (machine.go); the leader job around them (job.go) observes, decides and
// commits each step through the audited change path in one fenced
// transaction, so a new leader resumes a hold where the old one left it
// and never applies a step twice. The package never writes the switch
// table itself, and it knows nothing about HTTP.
package rollout
