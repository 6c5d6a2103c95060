package trigger

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/switchyard-io/switchyard/internal/oneline"
	"github.com/switchyard-io/switchyard/server"
)

// batchChunk bounds the rows of one statement of a batch (a database
// bounds the parameters of a statement: 11 columns × 500 rows stay far
// below every limit).
const batchChunk = 500

// batch is what one job transaction reads and writes for its rules: the
// rules, their states and their switches as stored, read in three queries
// whatever the number of rules, and the states and evaluations it
// records, written in one statement each when the transaction ends
// (flush). A step evaluating hundreds of rules thus costs a handful of
// round trips, not several per rule.
type batch struct {
	rules    map[int64]*Rule
	states   map[int64]*stateRow
	switches map[string]*server.Switch // by app + "/" + name

	saves []*stateRow
	evals []evaluationRow
	prune []int64 // rules whose oldest evaluations are forgotten
}

// readBatch reads the rules queried (as they are now: a rule deleted
// meanwhile is missing), their states, and the switches of the enforcing
// ones, inside tx.
func readBatch(tx *gorm.DB, queried []Rule) (*batch, error) {
	b := &batch{rules: map[int64]*Rule{}, states: map[int64]*stateRow{}, switches: map[string]*server.Switch{}}
	if len(queried) == 0 {
		return b, nil
	}
	ids := make([]int64, len(queried))
	var apps, names []string
	for i, r := range queried {
		ids[i] = r.ID
		if r.Mode != ModeDryRun {
			apps, names = append(apps, r.App), append(names, r.SwitchName)
		}
	}
	var rules []Rule
	if err := tx.Where("id IN ?", ids).Find(&rules).Error; err != nil {
		return nil, err
	}
	for i := range rules {
		b.rules[rules[i].ID] = &rules[i]
	}
	var rows []stateRow
	if err := tx.Where("trigger_id IN ?", ids).Find(&rows).Error; err != nil {
		return nil, err
	}
	for i := range rows {
		b.states[rows[i].TriggerID] = &rows[i]
	}
	if len(apps) == 0 {
		return b, nil
	}
	// A superset (every pair of the apps and names named) in one query;
	// the rules pick theirs by app and name.
	var sws []server.Switch
	if err := tx.Where("app IN ? AND name IN ?", slices.Compact(slices.Sorted(slices.Values(apps))), slices.Compact(slices.Sorted(slices.Values(names)))).
		Find(&sws).Error; err != nil {
		return nil, err
	}
	for i := range sws {
		b.switches[sws[i].App+"/"+sws[i].Name] = &sws[i]
	}
	return b, nil
}

// rule returns rule id as read, or nil when it was deleted.
func (b *batch) rule(id int64) *Rule { return b.rules[id] }

// state returns the stored state of rule id.
func (b *batch) state(id int64) (*stateRow, State, error) {
	row, ok := b.states[id]
	if !ok {
		return nil, State{}, fmt.Errorf("trigger: state of rule %d: %w", id, gorm.ErrRecordNotFound)
	}
	st, err := row.decode()
	return row, st, err
}

// switchOf returns the switch of rule r as read.
func (b *batch) switchOf(r *Rule) (*server.Switch, error) {
	sw, ok := b.switches[r.App+"/"+r.SwitchName]
	if !ok {
		return nil, fmt.Errorf("%w: %s/%s", server.ErrNotFound, r.App, r.SwitchName)
	}
	return sw, nil
}

// save records st as row's next revision, with smp as the last sample
// evaluated (see saveState); flush writes it.
func (b *batch) save(row *stateRow, st State, smp Sample, at time.Time) error {
	enc, err := json.Marshal(st)
	if err != nil {
		return err
	}
	row.Rev++
	row.State, row.Phase, row.Paused, row.UpdatedAt = string(enc), string(st.Phase), st.Paused, at
	row.LastAt, row.LastOutcome, row.LastValue, row.LastError = &at, string(smp.Outcome), valueText(smp), oneline.Clean(smp.Err, 500)
	b.saves = append(b.saves, row)
	return nil
}

// evaluated records one evaluation of rule id, whose state is now at
// revision rev; every twentieth revision of a rule also forgets its
// evaluations beyond keepEvaluations.
func (b *batch) evaluated(id, rev int64, smp Sample, d Decision, dryRun bool, at time.Time) {
	b.evals = append(b.evals, evaluationRow{
		TriggerID: id, At: at, Outcome: string(smp.Outcome), Value: valueText(smp), Error: oneline.Clean(smp.Err, 500),
		PhaseFrom: string(d.From), PhaseTo: string(d.To), Action: string(d.Action), DryRun: dryRun, Why: oneline.Clean(d.Why, 2000),
	})
	if rev%20 == 0 {
		b.prune = append(b.prune, id)
	}
}

// flush writes what the batch recorded: the states in one statement
// guarded by their revisions (a state written in between — a person's
// pause while the job evaluated — fails the whole batch with a conflict
// rather than be lost), the evaluations in another, and one prune.
func (b *batch) flush(tx *gorm.DB) error {
	for saves := range slices.Chunk(b.saves, batchChunk) {
		// An upsert updates every row in one statement; its WHERE keeps
		// the revision guard. A rule deleted meanwhile takes its state
		// row with it, and the insert of one fails on its foreign key.
		res := tx.Clauses(clause.OnConflict{
			Columns: []clause.Column{{Name: "trigger_id"}},
			DoUpdates: clause.AssignmentColumns([]string{"rev", "phase", "paused", "state", "last_at",
				"last_outcome", "last_value", "last_error", "updated_at"}),
			Where: clause.Where{Exprs: []clause.Expression{clause.Expr{SQL: "trigger_states.rev = excluded.rev - 1"}}},
		}).Create(saves)
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected != int64(len(saves)) {
			return fmt.Errorf("%w: the state of a rule changed concurrently", server.ErrConflict)
		}
	}
	if len(b.evals) > 0 {
		if err := tx.CreateInBatches(b.evals, batchChunk).Error; err != nil {
			return err
		}
	}
	if len(b.prune) > 0 {
		old := tx.Raw(`SELECT id FROM (SELECT id, ROW_NUMBER() OVER (PARTITION BY trigger_id ORDER BY id DESC) AS n
			FROM trigger_evaluations WHERE trigger_id IN ?) ranked WHERE n > ?`, b.prune, keepEvaluations)
		if err := tx.Where("id IN (?)", old).Delete(&evaluationRow{}).Error; err != nil {
			return err
		}
	}
	b.saves, b.evals, b.prune = nil, nil, nil
	return nil
}
