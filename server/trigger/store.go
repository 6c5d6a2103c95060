package trigger

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"gorm.io/gorm"

	"github.com/switchyard-io/switchyard/internal/oneline"
	"github.com/switchyard-io/switchyard/sdk/wire"
	"github.com/switchyard-io/switchyard/server"
)

// keepEvaluations is how many evaluations of each rule are kept.
const keepEvaluations = 300

// stateRow is a rule's evaluation state as stored; State is the JSON of a
// State, Phase and Paused repeat it for queries.
type stateRow struct {
	TriggerID   int64 `gorm:"primaryKey;autoIncrement:false"`
	Rev         int64
	Phase       string
	Paused      bool
	State       string
	LastAt      *time.Time
	LastOutcome string
	LastValue   string
	LastError   string
	UpdatedAt   time.Time
}

func (stateRow) TableName() string { return "trigger_states" }

func (r *stateRow) decode() (State, error) {
	var st State
	if err := json.Unmarshal([]byte(r.State), &st); err != nil {
		return st, fmt.Errorf("trigger: state of rule %d: %w", r.TriggerID, err)
	}
	return st, nil
}

// last is the last evaluated sample, if any.
func (r *stateRow) last() *LastSample {
	if r.LastAt == nil {
		return nil
	}
	return &LastSample{At: r.LastAt.UTC(), Outcome: Outcome(r.LastOutcome), Value: parseValue(r.LastValue), Error: r.LastError}
}

// evaluationRow is one evaluation as stored.
type evaluationRow struct {
	ID        int64 `gorm:"primaryKey"`
	TriggerID int64
	At        time.Time
	Outcome   string
	Value     string
	Error     string
	PhaseFrom string
	PhaseTo   string
	Action    string
	DryRun    bool
	Why       string
}

func (evaluationRow) TableName() string { return "trigger_evaluations" }

// Evaluation is one evaluation of a rule: what the query gave, the phases
// before and after, what the rule did (in dry run: would have done) and
// why.
type Evaluation struct {
	At      time.Time `json:"at"`
	Outcome Outcome   `json:"outcome"`
	Value   *Num      `json:"value"`
	Error   string    `json:"error,omitempty"`
	From    Phase     `json:"from"`
	To      Phase     `json:"to"`
	Action  Action    `json:"action,omitempty"`
	DryRun  bool      `json:"dry_run,omitempty"`
	Why     string    `json:"why"`
}

func (e *evaluationRow) view() Evaluation {
	return Evaluation{At: e.At.UTC(), Outcome: Outcome(e.Outcome), Value: parseValue(e.Value), Error: e.Error,
		From: Phase(e.PhaseFrom), To: Phase(e.PhaseTo), Action: Action(e.Action), DryRun: e.DryRun, Why: e.Why}
}

// LastSample is the last evaluated sample of a rule.
type LastSample struct {
	At      time.Time `json:"at"`
	Outcome Outcome   `json:"outcome"`
	Value   *Num      `json:"value"`
	Error   string    `json:"error,omitempty"`
}

// valueText stores a sample's value as text, so ±Inf survives any
// database; "" is no value.
func valueText(s Sample) string {
	if s.Outcome != OutcomeValue {
		return ""
	}
	return strconv.FormatFloat(s.Value, 'g', -1, 64)
}

func parseValue(s string) *Num {
	if s == "" {
		return nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) {
		return nil
	}
	n := Num(f)
	return &n
}

// insertState stores the first state of rule id.
func insertState(tx *gorm.DB, id int64, st State, now time.Time) (*stateRow, error) {
	b, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	row := &stateRow{TriggerID: id, Rev: 1, Phase: string(st.Phase), Paused: st.Paused, State: string(b), UpdatedAt: now}
	return row, tx.Create(row).Error
}

// loadState reads the state of rule id.
func loadState(tx *gorm.DB, id int64) (*stateRow, State, error) {
	var row stateRow
	if err := tx.Where("trigger_id = ?", id).Take(&row).Error; err != nil {
		return nil, State{}, fmt.Errorf("trigger: state of rule %d: %w", id, err)
	}
	st, err := row.decode()
	return &row, st, err
}

// saveState writes st over row, guarded by row's revision: a write that
// committed in between (a person's pause while the job evaluated) makes
// this one fail with a conflict rather than be lost. With smp set it also
// records the sample as the last one evaluated.
func saveState(tx *gorm.DB, row *stateRow, st State, smp *Sample, at time.Time) error {
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	set := map[string]any{"rev": row.Rev + 1, "phase": string(st.Phase), "paused": st.Paused, "state": string(b), "updated_at": at}
	if smp != nil {
		set["last_at"], set["last_outcome"], set["last_value"], set["last_error"] = at, string(smp.Outcome), valueText(*smp), oneline.Clean(smp.Err, 500)
	}
	res := tx.Model(&stateRow{}).Where("trigger_id = ? AND rev = ?", row.TriggerID, row.Rev).Updates(set)
	if res.Error != nil {
		return res.Error
	}
	if res.RowsAffected == 0 {
		return fmt.Errorf("%w: the state of rule %d changed concurrently", server.ErrConflict, row.TriggerID)
	}
	row.Rev++
	row.State, row.Phase, row.Paused = string(b), string(st.Phase), st.Paused
	return nil
}

// loadRule reads rule name of app, or server.ErrNotFound.
func loadRule(tx *gorm.DB, app, name string) (*Rule, error) {
	var r Rule
	err := tx.Where("app = ? AND name = ?", app, name).Take(&r).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, fmt.Errorf("%w: trigger %s/%s", server.ErrNotFound, app, name)
	}
	return &r, err
}

// loadSwitch reads the rule's switch inside tx; a missing switch is a
// field error of the rule.
func loadSwitch(tx *gorm.DB, app, name string) (*server.Switch, error) {
	var sw server.Switch
	err := tx.Where("app = ? AND name = ?", app, name).Take(&sw).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, &server.ValidationError{Fields: []*server.FieldError{{Field: "switch", Msg: fmt.Sprintf("there is no switch %s/%s; create it first", app, name)}}}
	}
	return &sw, err
}

// checkOneEnforcer refuses a second enforcing rule on a switch: two rules
// flipping one switch would undo each other (one recovers while the
// other's metric is still bad). Dry-run rules are not counted.
func checkOneEnforcer(tx *gorm.DB, r *Rule) error {
	if r.Mode != ModeEnforce {
		return nil
	}
	var other Rule
	err := tx.Where("app = ? AND switch_name = ? AND mode = ? AND id <> ?", r.App, r.SwitchName, ModeEnforce, r.ID).Take(&other).Error
	switch {
	case errors.Is(err, gorm.ErrRecordNotFound):
		return nil
	case err != nil:
		return err
	}
	return &server.ValidationError{Fields: []*server.FieldError{{Field: "switch", Msg: fmt.Sprintf(
		"switch %s/%s already has the enforcing rule %s; one enforcing rule per switch (make this one dry_run, or change %s)", r.App, r.SwitchName, other.Name, other.Name)}}}
}

func switchOn(sw *server.Switch) bool { return sw.State == wire.StateOn }
