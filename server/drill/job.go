package drill

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/switchyard-io/switchyard/server"
)

// Job is the leader job of the drills: it fires schedules (recording
// missed, overlapping and refused runs) and moves every run in progress
// through its phases (see decide), one fenced transaction per change of a
// run. It steps every second, and every 200 ms while a run is in progress.
type Job struct {
	s    *Service
	wake chan struct{}

	mu      sync.Mutex
	keepers map[int64]*keeper // by run id
	rounds  map[int64]*rounds // probe rounds under way or done, by run id
}

// maxReason bounds the audit reasons and summaries of runs.
const maxReason = 900

// activeEvery is the pace of the steps while a run is in progress.
const activeEvery = 200 * time.Millisecond

// Name names the job in logs.
func (j *Job) Name() string { return "drills" }

// Every is the idle period between steps.
func (j *Job) Every() time.Duration { return time.Second }

// Wake asks for an early step (a run in progress, a run asked for).
func (j *Job) Wake() <-chan struct{} { return j.wake }

func (j *Job) kick() {
	select {
	case j.wake <- struct{}{}:
	default:
	}
}

// Step fires due schedules and advances every run in progress.
func (j *Job) Step(ctx context.Context, t server.Term, now time.Time) error {
	var errs []error
	if err := j.schedule(ctx, t, now); err != nil {
		if errors.Is(err, server.ErrNotLeader) {
			return err
		}
		errs = append(errs, err)
	}
	var runs []Run
	if err := j.s.db.WithContext(ctx).Where("finished_at IS NULL").Order("id").Find(&runs).Error; err != nil {
		return errors.Join(append(errs, fmt.Errorf("drill: read runs: %w", err))...)
	}
	for i := range runs {
		if err := j.advance(ctx, t, &runs[i], now); err != nil {
			if errors.Is(err, server.ErrNotLeader) {
				return err
			}
			errs = append(errs, fmt.Errorf("drill: %s: %w", runs[i].Cause(), err))
		}
	}
	if len(runs) > 0 {
		time.AfterFunc(activeEvery, j.kick)
	}
	return errors.Join(errs...)
}
