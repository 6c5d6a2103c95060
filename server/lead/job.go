package lead

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/switchyard-io/switchyard/server"
)

// Job is a leader-only background job. While this console leads, the
// scheduler calls Step once at the start of the term and then every
// Every(), on a goroutine of the job's own, with the current time: a step
// looks at its durable state (in the database) and the world as of now,
// acts through fenced writes (server.InTerm, server.Fence), and returns.
// A step that finds a newer leader (server.ErrNotLeader) ends the term.
type Job interface {
	// Name names the job in logs.
	Name() string
	// Every is the period between steps.
	Every() time.Duration
	Step(ctx context.Context, t server.Term, now time.Time) error
}

// Waker is a Job that can ask for a step before its period ends (the
// publisher, when a change kicks it).
type Waker interface {
	Wake() <-chan struct{}
}

// Add registers a job. A job added while this console leads starts in the
// current term.
func (s *Scheduler) Add(j Job) { s.jobs.add(j, s.cfg) }

// jobSet holds the registered jobs and the running term, if any.
type jobSet struct {
	mu   sync.Mutex
	jobs []Job
	cur  *termRun
}

// termRun is one term's running jobs.
type termRun struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	t      server.Term
	wg     sync.WaitGroup
}

func (js *jobSet) add(j Job, cfg Config) {
	js.mu.Lock()
	defer js.mu.Unlock()
	js.jobs = append(js.jobs, j)
	if js.cur != nil {
		js.cur.start(j, cfg)
	}
}

// run runs every job in term t until ctx ends or a job finds a newer
// leader; it returns when all of them stopped.
func (js *jobSet) run(ctx context.Context, t server.Term, cfg Config) error {
	tctx, cancel := context.WithCancelCause(ctx)
	tr := &termRun{ctx: tctx, cancel: cancel, t: t}
	js.mu.Lock()
	js.cur = tr
	for _, j := range js.jobs {
		tr.start(j, cfg)
	}
	js.mu.Unlock()
	<-tctx.Done()
	js.mu.Lock()
	js.cur = nil
	js.mu.Unlock()
	tr.wg.Wait()
	cancel(nil)
	if err := context.Cause(tctx); errors.Is(err, server.ErrNotLeader) {
		return err
	}
	return ctx.Err()
}

// start runs j's loop in the term.
func (tr *termRun) start(j Job, cfg Config) {
	tr.wg.Add(1)
	go func() {
		defer tr.wg.Done()
		if err := loop(tr.ctx, j, tr.t, cfg); err != nil {
			tr.cancel(err)
		}
	}()
}

// loop steps j at the start of the term, then on its period or when it
// wakes, until ctx ends; it returns server.ErrNotLeader when a step found a
// newer leader. Other errors are logged, each kind once until the job
// succeeds again, and the job carries on.
func loop(ctx context.Context, j Job, t server.Term, cfg Config) error {
	var wake <-chan struct{}
	if w, ok := j.(Waker); ok {
		wake = w.Wake()
	}
	tick := time.NewTicker(j.Every())
	defer tick.Stop()
	var lastErr string
	for {
		err := j.Step(ctx, t, cfg.Now())
		switch {
		case errors.Is(err, server.ErrNotLeader):
			return err
		case err != nil && ctx.Err() == nil:
			if msg := err.Error(); msg != lastErr {
				lastErr = msg
				cfg.Logger.Warn("lead: job step failed", "job", j.Name(), "term", t.Rev, "err", err)
			}
		case err == nil && lastErr != "":
			lastErr = ""
			cfg.Logger.Info("lead: job recovered", "job", j.Name(), "term", t.Rev)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		case <-wake:
		}
	}
}
