package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/switchyard-io/switchyard/server"
)

// The history outlives the console that sampled it: the leader writes each
// frame it samples to the database (HistoryJob), and a starting console
// loads what is there (LoadHistory). One writer keeps the table small —
// one row per HistoryStep, none older than HistoryLength: 721 rows at the
// defaults (30s, 6h), however many switches and rules there are; a row
// holds about 40 bytes per switch or rule sampled. Every console samples
// its own model as before, so a follower that becomes leader has the
// history in memory and goes on writing from the newest stored frame.

// historyRow is one frame as stored.
type historyRow struct {
	At    int64 `gorm:"primaryKey;autoIncrement:false"` // unix seconds
	Frame string
}

func (historyRow) TableName() string { return "fleet_history" }

// storedFrame is a frame's stored JSON.
type storedFrame struct {
	Switches map[string]map[string]Values `json:"switches,omitempty"`
	Limits   map[string]map[string]Values `json:"limits,omitempty"`
}

// MarshalJSON writes v as a JSON array, no data as null.
func (v Values) MarshalJSON() ([]byte, error) {
	b := []byte{'['}
	for i, x := range v {
		if i > 0 {
			b = append(b, ',')
		}
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			b = append(b, "null"...)
			continue
		}
		b = strconv.AppendFloat(b, float64(x), 'g', -1, 32)
	}
	return append(b, ']'), nil
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (v *Values) UnmarshalJSON(b []byte) error {
	var xs []*float64
	if err := json.Unmarshal(b, &xs); err != nil {
		return err
	}
	if len(xs) != len(v) {
		return fmt.Errorf("fleet: %d values, want %d", len(xs), len(v))
	}
	for i, x := range xs {
		v[i] = float32(nanValue)
		if x != nil {
			v[i] = float32(*x)
		}
	}
	return nil
}

// LoadHistory adds the history stored in db, the last HistoryLength of it,
// to the model, and returns how many frames it read. Call it before Run.
func (m *Model) LoadHistory(ctx context.Context, db *gorm.DB) (int, error) {
	var rows []historyRow
	since := m.cfg.Now().Add(-m.cfg.HistoryLength).Unix()
	if err := db.WithContext(ctx).Where("at >= ?", since).Order("at").Find(&rows).Error; err != nil {
		return 0, fmt.Errorf("fleet: load history: %w", err)
	}
	frames := make([]Frame, 0, len(rows))
	for _, r := range rows {
		var sf storedFrame
		if err := json.Unmarshal([]byte(r.Frame), &sf); err != nil {
			m.cfg.Logger.Warn("fleet: stored history frame does not parse; skipped", "at", r.At, "err", err)
			continue
		}
		frames = append(frames, Frame{At: r.At, Switches: sf.Switches, Limits: sf.Limits})
	}
	m.Restore(frames)
	return len(frames), nil
}

// HistoryJob is the leader job that keeps the model's history in the
// database: every HistoryStep it writes the frames sampled since the newest
// stored one and deletes the frames older than HistoryLength.
type HistoryJob struct {
	m   *Model
	svc *server.Service
	// term and saved: the term the job last stepped in, and the newest
	// frame stored as of its last step (read again in every new term:
	// another leader wrote meanwhile).
	term, saved int64
}

// HistoryJob returns the job keeping m's history through svc.
func (m *Model) HistoryJob(svc *server.Service) *HistoryJob { return &HistoryJob{m: m, svc: svc} }

// Name names the job.
func (j *HistoryJob) Name() string { return "fleet_history" }

// Every is the sampling step.
func (j *HistoryJob) Every() time.Duration { return j.m.cfg.HistoryStep }

// Step stores the new frames and prunes the old ones in one fenced
// transaction.
func (j *HistoryJob) Step(ctx context.Context, t server.Term, now time.Time) error {
	if j.term != t.Rev {
		var newest *int64
		if err := j.svc.DB().WithContext(ctx).Model(&historyRow{}).Select("MAX(at)").Scan(&newest).Error; err != nil {
			return fmt.Errorf("fleet: history: newest frame: %w", err)
		}
		j.term, j.saved = t.Rev, 0
		if newest != nil {
			j.saved = *newest
		}
	}
	cut := now.Add(-j.m.cfg.HistoryLength).Unix()
	frames := j.m.Frames(max(j.saved, cut-1))
	rows := make([]historyRow, 0, len(frames))
	for _, f := range frames {
		b, err := json.Marshal(storedFrame{Switches: f.Switches, Limits: f.Limits})
		if err != nil {
			return fmt.Errorf("fleet: history frame %d: %w", f.At, err)
		}
		rows = append(rows, historyRow{At: f.At, Frame: string(b)})
	}
	_, err := j.svc.InTermStateOnly(ctx, t, func(jt *server.JobTx) error {
		tx := jt.DB()
		if len(rows) > 0 {
			if err := tx.Clauses(clause.OnConflict{DoNothing: true}).CreateInBatches(rows, 100).Error; err != nil {
				return err
			}
		}
		return tx.Where("at < ?", cut).Delete(&historyRow{}).Error
	})
	if err != nil {
		return fmt.Errorf("fleet: history: %w", err)
	}
	if len(rows) > 0 {
		j.saved = rows[len(rows)-1].At
	}
	return nil
}
