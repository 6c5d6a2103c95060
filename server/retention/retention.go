// Package retention is the leader's pruning of history: finished drill
// runs, resolved findings, finished rollout plans, trigger evaluations and
// finished deliveries older than the retention age are deleted, once an
// hour, in one fenced transaction that records one audit event saying how
// many rows of each kind went.
//
// Each domain says what of its history may go (a Pruner); this package
// only schedules them. It never prunes the audit log, which is append-only.
package retention

import (
	"context"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/server"
)

// DefaultAge is how long history is kept by default.
const DefaultAge = 90 * 24 * time.Hour

// Pruner deletes one kind of history that ended before cut, within tx, at
// most limit rows (oldest first, see Delete), and returns how many rows
// it deleted.
type Pruner struct {
	// Kind names what is pruned in the audit event ("drill_runs").
	Kind  string
	Prune func(tx *gorm.DB, cut time.Time, limit int) (int64, error)
}

// Delete deletes up to limit rows of model (a table with an id column)
// that match where, lowest id first, and returns how many it deleted: the
// body of most Pruners.
func Delete(tx *gorm.DB, model any, limit int, where string, args ...any) (int64, error) {
	ids := tx.Model(model).Select("id").Where(where, args...).Order("id").Limit(limit)
	res := tx.Where("id IN (?)", ids).Delete(model)
	return res.RowsAffected, res.Error
}

// Config configures the job.
type Config struct {
	Service *server.Service
	// Age is how long history is kept (default DefaultAge).
	Age time.Duration
	// Every is the period of the job (default 1h).
	Every time.Duration
	// Batch bounds the rows of each kind one step deletes (default
	// 10,000), so a step's transaction stays short however much history
	// piled up; while a kind has more, the job steps again at once.
	Batch   int
	Pruners []Pruner
}

// Job is the leader's retention job.
type Job struct {
	cfg  Config
	wake chan struct{}
}

// New returns the retention job.
func New(cfg Config) *Job {
	if cfg.Age <= 0 {
		cfg.Age = DefaultAge
	}
	if cfg.Every <= 0 {
		cfg.Every = time.Hour
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 10_000
	}
	return &Job{cfg: cfg, wake: make(chan struct{}, 1)}
}

// Wake asks for the next step at once while a batch left history behind.
func (j *Job) Wake() <-chan struct{} { return j.wake }

// Name names the job in logs.
func (j *Job) Name() string { return "retention" }

// Every is the period between steps.
func (j *Job) Every() time.Duration { return j.cfg.Every }

// Step prunes what ended more than Age before now, up to Batch rows of
// each kind. When anything went, the prune is audited as one event (actor
// system, cause retention) whose after lists the rows deleted by kind and
// the cut; nothing pruned, no event.
func (j *Job) Step(ctx context.Context, t server.Term, now time.Time) error {
	cut := now.Add(-j.cfg.Age).UTC()
	var more bool
	_, err := j.cfg.Service.InTerm(ctx, t, func(tx *server.JobTx) error {
		deleted := map[string]int64{}
		var parts []string
		more = false
		for _, p := range j.cfg.Pruners {
			n, err := p.Prune(tx.DB(), cut, j.cfg.Batch)
			if err != nil {
				return fmt.Errorf("retention: prune %s: %w", p.Kind, err)
			}
			if n > 0 {
				deleted[p.Kind] = n
				parts = append(parts, fmt.Sprintf("%d %s", n, p.Kind))
			}
			more = more || n >= int64(j.cfg.Batch)
		}
		if len(deleted) == 0 {
			return nil
		}
		return tx.Commit(server.Audited{
			Actor:  server.JobActor(audit.ActorSystem, "retention"),
			Action: audit.RetentionPrune,
			Reason: fmt.Sprintf("retention: deleted %s that ended before %s (kept %s)", strings.Join(parts, ", "),
				cut.Format(time.RFC3339), server.ShortDuration(j.cfg.Age)),
			Apply: func(*gorm.DB) (string, any, any, error) {
				return "retention", nil, Pruned{Before: cut, Age: server.ShortDuration(j.cfg.Age), Deleted: deleted}, nil
			},
		})
	})
	if err == nil && more {
		select {
		case j.wake <- struct{}{}:
		default:
		}
	}
	return err
}

// Pruned is what one prune deleted: the after of its audit event.
type Pruned struct {
	Before  time.Time        `json:"before"`
	Age     string           `json:"age"`
	Deleted map[string]int64 `json:"deleted"`
}
