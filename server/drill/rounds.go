package drill

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"gorm.io/gorm"
)

// Probe rounds run off the job's step: a step starts a stage's rounds on
// goroutines of their own, with a deadline, and a later step collects
// them. So a hanging endpoint — what a drill may provoke — holds up no
// step: a person's abort, a change of the switch, an abort condition and
// the end of the duration take effect at the next step, and no other run
// waits.

// Stages of a run's probing.
const (
	stageBaseline = "baseline" // the undegraded path, before the override
	stageDegraded = "degraded" // while the override is on
	stageAfter    = "after"    // after the revert
)

// MaxRoundBudget bounds requests × timeout of a probe: the longest one
// round may take.
const MaxRoundBudget = 2 * time.Minute

// rounds are one stage's probe rounds of a run, under way or done.
type rounds struct {
	stage  string
	term   int64
	cancel context.CancelFunc
	done   chan struct{}
	out    []ProbeRound // by probe, written before done is closed
}

// roundBudget is the longest the probes' rounds may take: they run side by
// side, each bounded by its requests × timeout.
func (p *plan) roundBudget() time.Duration {
	var b time.Duration
	for _, pr := range p.probes {
		b = max(b, pr.budget())
	}
	return b
}

func (pr probePlan) budget() time.Duration { return time.Duration(pr.requests) * pr.timeout }

// probe returns the stage's rounds of run r once they are done; until then
// it starts them (when none of this stage and term are under way: any
// other stage's are stopped) and reports false. The rounds end within
// limit from their start, or with ctx (the term).
func (j *Job) probe(ctx context.Context, term int64, r *Run, stage string, pl *plan, limit time.Duration) ([]ProbeRound, bool, error) {
	j.mu.Lock()
	rs := j.rounds[r.ID]
	if rs != nil && rs.stage == stage && rs.term == term {
		defer j.mu.Unlock()
		select {
		case <-rs.done:
			delete(j.rounds, r.ID)
			rs.cancel()
			return rs.out, true, nil
		default:
			return nil, false, nil
		}
	}
	j.mu.Unlock()
	if rs != nil {
		j.stopProbes(r.ID)
	}
	if err := j.probeHeaders(ctx, r, pl); err != nil {
		return nil, false, err
	}
	rctx, cancel := context.WithTimeout(ctx, max(limit, 0))
	rs = &rounds{stage: stage, term: term, cancel: cancel, done: make(chan struct{}), out: make([]ProbeRound, len(pl.probes))}
	var wg sync.WaitGroup
	for i, pr := range pl.probes {
		wg.Go(func() {
			pctx, cancel := context.WithTimeout(rctx, pr.budget())
			defer cancel()
			rs.out[i] = j.s.prober.round(pctx, pr)
		})
	}
	go func() {
		wg.Wait()
		close(rs.done)
		j.kick() // the next step collects them
	}()
	j.mu.Lock()
	j.rounds[r.ID] = rs
	j.mu.Unlock()
	return nil, false, nil
}

// probeHeaders gives the run's probes the header values the run does not
// store (tokens, cookies): the drill's, as stored now, for each probe of
// the run that the drill still has (same position, method and URL), and
// for the header names the run's spec lists.
func (j *Job) probeHeaders(ctx context.Context, r *Run, pl *plan) error {
	var d Drill
	err := j.s.db.WithContext(ctx).Where("app = ? AND name = ?", r.App, r.Drill).Take(&d).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil // deleted: its runs probe without the values
	}
	if err != nil {
		return fmt.Errorf("read the drill's probe headers: %w", err)
	}
	sp, err := d.spec()
	if err != nil {
		return fmt.Errorf("read the drill's probe headers: %w", err)
	}
	for i := range pl.probes {
		pr := &pl.probes[i]
		if i >= len(sp.Probes) || sp.Probes[i].URL != pr.URL || cmpOr(sp.Probes[i].Method, http.MethodGet) != pr.Method {
			continue
		}
		h := make(map[string]string, len(pr.Headers))
		for k := range pr.Headers {
			h[k] = sp.Probes[i].Headers[k]
		}
		pr.Headers = h
	}
	return nil
}

// underway reports whether the run's rounds of stage are running in term,
// not done yet.
func (j *Job) underway(runID, term int64, stage string) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	rs := j.rounds[runID]
	if rs == nil || rs.stage != stage || rs.term != term {
		return false
	}
	select {
	case <-rs.done:
		return false
	default:
		return true
	}
}

// cutShort stops the run's rounds under way and returns what they showed
// so far, if they were of stage and answer within a moment of being
// stopped (an HTTP request ends with its context).
func (j *Job) cutShort(runID int64, stage string) []ProbeRound {
	j.mu.Lock()
	rs := j.rounds[runID]
	delete(j.rounds, runID)
	j.mu.Unlock()
	if rs == nil {
		return nil
	}
	rs.cancel()
	if rs.stage != stage {
		return nil
	}
	select {
	case <-rs.done:
		return rs.out
	case <-time.After(100 * time.Millisecond):
		return nil
	}
}

// stopProbes stops the run's rounds under way, if any.
func (j *Job) stopProbes(runID int64) { j.cutShort(runID, "") }
