package lead_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-io/switchyard/internal/etcdtest"
	"github.com/switchyard-io/switchyard/internal/servertest"
	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/lead"
)

// countJob records its steps: the term and the time it was given.
type countJob struct {
	every time.Duration
	wake  chan struct{}
	mu    sync.Mutex
	terms []int64
	times []time.Time
	fail  atomic.Bool // the next step finds a newer leader
}

func (j *countJob) Name() string          { return "count" }
func (j *countJob) Every() time.Duration  { return j.every }
func (j *countJob) Wake() <-chan struct{} { return j.wake }
func (j *countJob) Step(_ context.Context, t server.Term, now time.Time) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.terms = append(j.terms, t.Rev)
	j.times = append(j.times, now)
	if j.fail.CompareAndSwap(true, false) {
		return server.ErrNotLeader
	}
	return nil
}

func (j *countJob) steps() (int, int64, time.Time) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if len(j.terms) == 0 {
		return 0, 0, time.Time{}
	}
	return len(j.terms), j.terms[len(j.terms)-1], j.times[len(j.times)-1]
}

// TestJobsRunWhileLeading: only the leader's jobs step, at the start of
// the term, on their period and when woken, with the scheduler's clock; the
// term is recorded in the database first; a step that finds a newer leader
// ends the term and the scheduler campaigns again.
func TestJobsRunWhileLeading(t *testing.T) {
	srv := etcdtest.Start(t)
	db := openDB(t)
	svc := server.NewService(db, nil)
	clock := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	newJob := func() *countJob { return &countJob{every: time.Hour, wake: make(chan struct{}, 1)} }
	start := func(id string, j *countJob) *lead.Scheduler {
		s := lead.New(srv.Client(t), svc, lead.Config{Namespace: "default", ID: id, Now: func() time.Time { return clock }})
		s.Add(j)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { s.Run(ctx); close(done) }()
		t.Cleanup(func() { cancel(); <-done })
		return s
	}
	ja, jb := newJob(), newJob()
	a := start("a", ja)
	servertest.Eventually(t, 10*time.Second, "a leads", a.Leading)
	b := start("b", jb)
	servertest.Eventually(t, 10*time.Second, "a's job stepped at the start of its term", func() bool { n, _, _ := ja.steps(); return n == 1 })
	_, term, at := ja.steps()
	if rev, holder, _ := svc.CurrentTerm(context.Background()); rev != term || holder != "a" {
		t.Fatalf("database term %d of %q, the job ran in %d", rev, holder, term)
	}
	if !at.Equal(clock) {
		t.Fatalf("step at %v, want the scheduler's clock %v", at, clock)
	}
	ja.wake <- struct{}{}
	servertest.Eventually(t, 10*time.Second, "a woken step", func() bool { n, _, _ := ja.steps(); return n == 2 })
	if n, _, _ := jb.steps(); n != 0 || b.Leading() {
		t.Fatalf("the follower's job stepped %d times", n)
	}
	// The next step finds a newer leader: a steps down, and whoever leads
	// next runs in a newer term.
	ja.fail.Store(true)
	ja.wake <- struct{}{}
	servertest.Eventually(t, 10*time.Second, "a newer term", func() bool {
		rev, _, _ := svc.CurrentTerm(context.Background())
		return rev > term && (a.Leading() || b.Leading())
	})
}

// TestTermAfterEtcdReplaced: the database records a term from an etcd
// that is gone (restored from a backup or replaced: its revisions start
// again far below it). A new leader on the new etcd takes the term over
// and its jobs run, instead of no console ever leading again.
func TestTermAfterEtcdReplaced(t *testing.T) {
	srv := etcdtest.Start(t)
	svc := server.NewService(openDB(t), nil)
	ctx := context.Background()
	if err := svc.ClaimTerm(ctx, server.Term{Rev: 1_000_000, Holder: "old-cluster"}); err != nil {
		t.Fatal(err)
	}
	j := &countJob{every: time.Hour, wake: make(chan struct{}, 1)}
	s := lead.New(srv.Client(t), svc, lead.Config{Namespace: "default", ID: "new"})
	s.Add(j)
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { s.Run(rctx); close(done) }()
	defer func() { cancel(); <-done }()
	servertest.Eventually(t, 10*time.Second, "the job runs under the new etcd", func() bool { n, _, _ := j.steps(); return n > 0 })
	rev, holder, _ := svc.CurrentTerm(ctx)
	if _, term, _ := j.steps(); rev != term || holder != "new" || rev >= 1_000_000 {
		t.Fatalf("database term %d of %q, the job ran in %d", rev, holder, term)
	}
}

// panicJob panics at every step.
type panicJob struct{ steps atomic.Int64 }

func (j *panicJob) Name() string         { return "panicky" }
func (j *panicJob) Every() time.Duration { return 10 * time.Millisecond }
func (j *panicJob) Step(context.Context, server.Term, time.Time) error {
	j.steps.Add(1)
	var m map[string]int
	m["boom"]++ // a nil map write: a runtime panic, as a bug would cause
	return nil
}

// TestPanickingStepRecovered: a job whose step panics keeps being stepped
// in the same term (the console and its leadership survive), another job
// steps on beside it, and the metric counts every panic.
func TestPanickingStepRecovered(t *testing.T) {
	srv := etcdtest.Start(t)
	svc := server.NewService(openDB(t), nil)
	reg := prometheus.NewRegistry()
	panics := server.NewMetrics(reg).JobPanics
	s := lead.New(srv.Client(t), svc, lead.Config{Namespace: "default", ID: "a", JobPanics: panics})
	bad, good := &panicJob{}, &countJob{every: 10 * time.Millisecond, wake: make(chan struct{}, 1)}
	if err := s.Add(bad); err != nil {
		t.Fatal(err)
	}
	if err := s.Add(good); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	servertest.Eventually(t, 10*time.Second, "the panicking job stepped 5 times", func() bool { return bad.steps.Load() >= 5 })
	servertest.Eventually(t, 10*time.Second, "the other job stepped 5 times", func() bool { n, _, _ := good.steps(); return n >= 5 })
	_, goodTerm, _ := good.steps()
	rev, _, _ := svc.CurrentTerm(context.Background())
	if !s.Leading() || goodTerm != rev {
		t.Fatalf("leading %v; the other job ran in term %d, the database records %d: the panics ended the term", s.Leading(), goodTerm, rev)
	}
	counted := panicsCounted(t, reg)
	if counted["panicky"] < 5 || counted["panicky"] > float64(bad.steps.Load()) || len(counted) != 1 {
		t.Fatalf("switchyard_job_panics_total %v after %d steps of the panicking job", counted, bad.steps.Load())
	}
}

// panicsCounted reads switchyard_job_panics_total from reg, by job.
func panicsCounted(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "switchyard_job_panics_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			out[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
		}
	}
	return out
}

// TestAddRefusesNonPositivePeriod: a job that could never be ticked is
// refused when it is registered, not when its term starts.
func TestAddRefusesNonPositivePeriod(t *testing.T) {
	s := lead.New(nil, nil, lead.Config{})
	for _, every := range []time.Duration{0, -time.Second} {
		err := s.Add(&countJob{every: every})
		if err == nil || !strings.Contains(err.Error(), "count") || !strings.Contains(err.Error(), "not positive") {
			t.Fatalf("Every %v: %v, want a refusal naming the job", every, err)
		}
	}
	if err := s.Add(&countJob{every: time.Second}); err != nil {
		t.Fatal(err)
	}
}
