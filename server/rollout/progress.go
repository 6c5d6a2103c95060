package rollout

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"time"

	"github.com/switchyard-io/switchyard/sdk/wire"
)

// States of a plan. Pending, running and paused are active: a switch has
// at most one active plan.
const (
	Pending  = "pending"  // created; the leader has not applied its first step yet
	Running  = "running"  // the leader advances it
	Paused   = "paused"   // stopped by a person, a gate or a person's change to the switch
	Done     = "done"     // every step passed
	Aborted  = "aborted"  // stopped for good by a person; the switch stays as it is
	Reverted = "reverted" // the switch was put back as it was before the plan
)

// Active reports whether a plan in state is still to finish.
func Active(state string) bool { return state == Pending || state == Running || state == Paused }

// Progress is a plan's durable run state: which step it is at and what
// each step did. A new leader resumes from it.
type Progress struct {
	// Step is the index of the current step; -1 before the first is
	// applied.
	Step  int          `json:"step"`
	Steps []StepRecord `json:"steps,omitempty"`
	// Errors counts the consecutive measurements that could not ask a
	// source.
	Errors int `json:"errors,omitempty"`
	// Note says what the plan waits for, or why it paused.
	Note string `json:"note,omitempty"`
	// Request is a person's pending request the leader carries out.
	Request *Request `json:"request,omitempty"`
}

// Request kinds.
const (
	RequestAdvance = "advance" // end the current step now and apply the next
	RequestRevert  = "revert"  // put the switch back as before the plan and end it (abort with revert)
	RequestReapply = "reapply" // apply the current step again and restart its gate (resume)
)

// Request is what a person asked of a running plan that needs the leader
// to change the switch.
type Request struct {
	Kind   string    `json:"kind"`
	By     string    `json:"by"`
	Reason string    `json:"reason"`
	At     time.Time `json:"at"`
}

// Step outcomes.
const (
	OutcomePassed   = "passed"
	OutcomeAdvanced = "advanced" // a person ended it early
	OutcomeFailed   = "failed"
	OutcomeStopped  = "stopped" // the plan ended during the step (abort, revert by request)
)

// StepRecord is what one step did.
type StepRecord struct {
	// Index is the step of the plan this record is for.
	Index int `json:"index"`
	// Rollout is what the step set (for an off step, the rollout the
	// switch kept).
	Rollout wire.Rollout `json:"rollout"`
	Off     bool         `json:"off,omitempty"`
	// Raised says why the step's percent is above the plan's: the first
	// step reaches at least one live instance.
	Raised string `json:"raised,omitempty"`
	// Version is the switch version the step set (or found already set);
	// Revision is the etcd revision that carries it, once seen.
	Version   int64     `json:"version"`
	Revision  int64     `json:"revision,omitempty"`
	StartedAt time.Time `json:"started_at"`
	// ConvergedAt is when enough targeted instances had applied Version:
	// the hold counts from here.
	ConvergedAt *time.Time `json:"converged_at,omitempty"`
	// Applied of Targeted live instances had applied Version when last
	// seen (at convergence, once converged); Instances are the targeted
	// ones (at most maxListed).
	Applied   int      `json:"applied"`
	Targeted  int      `json:"targeted"`
	Instances []string `json:"instances,omitempty"`
	// Measurements and Failures count the gate's measurements in the
	// hold; Verdicts are the last measurement's, taken at MeasuredAt.
	Measurements int        `json:"measurements"`
	Failures     int        `json:"failures"`
	MeasuredAt   *time.Time `json:"measured_at,omitempty"`
	Passed       bool       `json:"passed,omitempty"` // the last measurement passed
	Verdicts     []Verdict  `json:"verdicts,omitempty"`
	EndedAt      *time.Time `json:"ended_at,omitempty"`
	Outcome      string     `json:"outcome,omitempty"`
	// Why says who ended it early, or what failed.
	Why string `json:"why,omitempty"`
}

// maxListed bounds the instance ids a record keeps.
const maxListed = 50

// Verdict outcomes of one condition at one measurement.
const (
	VerdictPass   = "pass"
	VerdictFail   = "fail"
	VerdictNoData = "no_data"
	VerdictError  = "error"
)

// Verdict is one condition's outcome at one measurement.
type Verdict struct {
	Condition int     `json:"condition"`
	Outcome   string  `json:"outcome"`
	Value     *Number `json:"value,omitempty"`
	Error     string  `json:"error,omitempty"`
}

// Number is a measured value. Prometheus values may be ±Inf, which JSON
// numbers cannot hold: they are written "+Inf" and "-Inf".
type Number float64

// MarshalJSON writes finite values as numbers and infinities as strings.
func (n Number) MarshalJSON() ([]byte, error) {
	f := float64(n)
	switch {
	case math.IsInf(f, 1):
		return []byte(`"+Inf"`), nil
	case math.IsInf(f, -1):
		return []byte(`"-Inf"`), nil
	case math.IsNaN(f):
		return []byte(`"NaN"`), nil
	}
	return json.Marshal(f)
}

// UnmarshalJSON reads what MarshalJSON writes.
func (n *Number) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return errors.New("rollout: a number or \"+Inf\", \"-Inf\"")
		}
		*n = Number(f)
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	*n = Number(f)
	return nil
}

// String writes the value for people.
func (n Number) String() string { return strconv.FormatFloat(float64(n), 'g', 6, 64) }

// current returns the record of the current step, nil before the first.
func (pr *Progress) current() *StepRecord {
	if pr.Step < 0 || len(pr.Steps) == 0 {
		return nil
	}
	return &pr.Steps[len(pr.Steps)-1]
}

// begin records that step index was applied at now, setting the switch
// to version.
func (pr *Progress) begin(index int, r wire.Rollout, off bool, raised string, version int64, now time.Time) {
	pr.Step = index
	pr.Errors = 0
	pr.Note = ""
	pr.Steps = append(pr.Steps, StepRecord{Index: index, Rollout: r, Off: off, Raised: raised, Version: version, StartedAt: now.UTC()})
}

// end closes the current step with an outcome.
func (pr *Progress) end(outcome, why string, now time.Time) {
	if cur := pr.current(); cur != nil && cur.EndedAt == nil {
		t := now.UTC()
		cur.EndedAt, cur.Outcome, cur.Why = &t, outcome, why
	}
}

// clone returns a deep copy (decisions never change their input).
func (pr Progress) clone() Progress {
	b, _ := json.Marshal(pr)
	var out Progress
	_ = json.Unmarshal(b, &out)
	return out
}

// HoldEndsAt is when the current step's hold ends, nil before it
// converged.
func (r *StepRecord) HoldEndsAt(p Plan) *time.Time {
	if r.ConvergedAt == nil || r.Index >= len(p.Steps) {
		return nil
	}
	t := r.ConvergedAt.Add(p.Steps[r.Index].Hold.D())
	return &t
}
