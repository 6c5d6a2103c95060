package lead

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"

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
// current term. A job whose period is not positive is refused: it could
// never be ticked.
func (s *Scheduler) Add(j Job) error {
	if every := j.Every(); every <= 0 {
		return fmt.Errorf("lead: job %s: period %v is not positive", j.Name(), every)
	}
	s.jobs.add(j, s.cfg)
	return nil
}

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
// newer leader. A step that panics is recovered (see step). Other errors
// are logged once per kind (see errorKind) until the job succeeds again,
// and the job carries on.
func loop(ctx context.Context, j Job, t server.Term, cfg Config) error {
	var wake <-chan struct{}
	if w, ok := j.(Waker); ok {
		wake = w.Wake()
	}
	tick := time.NewTicker(j.Every())
	defer tick.Stop()
	var (
		lastKind string
		failures int // steps failed since the last success
	)
	for {
		err := step(ctx, j, t, cfg)
		switch {
		case errors.Is(err, server.ErrNotLeader):
			return err
		case err != nil && ctx.Err() == nil:
			failures++
			if kind := errorKind(err); kind != lastKind {
				lastKind = kind
				cfg.Logger.Warn("lead: job step failed", "job", j.Name(), "term", t.Rev, "err", err)
			}
		case err == nil && failures > 0:
			cfg.Logger.Info("lead: job recovered", "job", j.Name(), "term", t.Rev, "failed_steps", failures)
			lastKind, failures = "", 0
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		case <-wake:
		}
	}
}

// step runs one step of j. A panic is recovered and returned as an error
// (a panicking step must not take the console, and with it every other
// job, down — nor crash-loop each console in turn as it becomes leader):
// it is logged with its stack and counted in cfg.JobPanics.
func step(ctx context.Context, j Job, t server.Term, cfg Config) (err error) {
	defer func() {
		if p := recover(); p != nil {
			cfg.Logger.Error("lead: job step panicked", "job", j.Name(), "term", t.Rev, "panic", p, "stack", string(debug.Stack()))
			if cfg.JobPanics != nil {
				cfg.JobPanics.WithLabelValues(j.Name()).Inc()
			}
			err = &panicError{job: j.Name(), value: p}
		}
	}()
	return j.Step(ctx, t, cfg.Now())
}

// panicError is a step that panicked.
type panicError struct {
	job   string
	value any
}

func (e *panicError) Error() string { return fmt.Sprintf("lead: job %s panicked: %v", e.job, e.value) }

// errorKind names what kind of failure err is, so that a job failing the
// same way at every step logs once, however its messages differ (ids,
// addresses, times): the operation that failed — the message up to its
// first ": ", numbers masked — and the type of the error at the bottom of
// its chain (a *pgconn.PgError, a *net.OpError,
// context.deadlineExceededError…). A joined error is the set of its
// parts' kinds.
func errorKind(err error) string {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var kinds []string
		for _, e := range j.Unwrap() {
			kinds = append(kinds, errorKind(e))
		}
		slices.Sort(kinds)
		return strings.Join(slices.Compact(kinds), " + ")
	}
	op, _, _ := strings.Cut(err.Error(), ": ")
	var b strings.Builder
	for i, r := range op {
		switch {
		case !unicode.IsDigit(r):
			b.WriteRune(r)
		case i == 0 || !unicode.IsDigit(rune(op[i-1])):
			b.WriteByte('#')
		}
	}
	leaf := err
	for {
		next := errors.Unwrap(leaf)
		if next == nil {
			break
		}
		leaf = next
	}
	if _, joined := leaf.(interface{ Unwrap() []error }); joined {
		return b.String() + ": " + errorKind(leaf)
	}
	return fmt.Sprintf("%s [%T]", b.String(), leaf)
}
