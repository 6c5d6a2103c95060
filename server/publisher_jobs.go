package server

import (
	"context"
	"time"
)

// The publisher's two leader jobs (see server/lead): publish drains the
// outbox when a change kicks it and every DrainInterval, reconcile makes
// etcd equal to the database at the start of every term and every
// ReconcileInterval.

// Defaults of the publisher's jobs.
const (
	DefaultDrainInterval     = 250 * time.Millisecond
	DefaultReconcileInterval = 30 * time.Second
)

// PublishJob drains the outbox: at once when a change kicks it, and every
// interval to pick up other consoles' changes.
type PublishJob struct {
	p     *Publisher
	every time.Duration
}

// PublishJob returns the drain job (every ≤ 0: DefaultDrainInterval).
func (p *Publisher) PublishJob(every time.Duration) *PublishJob {
	if every <= 0 {
		every = DefaultDrainInterval
	}
	return &PublishJob{p: p, every: every}
}

func (j *PublishJob) Name() string          { return "publish" }
func (j *PublishJob) Every() time.Duration  { return j.every }
func (j *PublishJob) Wake() <-chan struct{} { return j.p.kick }
func (j *PublishJob) Step(ctx context.Context, t Term, _ time.Time) error {
	return j.p.Drain(ctx, t.Fence)
}

// ReconcileJob is the full reconciliation.
type ReconcileJob struct {
	p     *Publisher
	every time.Duration
}

// ReconcileJob returns the reconciliation job (every ≤ 0:
// DefaultReconcileInterval).
func (p *Publisher) ReconcileJob(every time.Duration) *ReconcileJob {
	if every <= 0 {
		every = DefaultReconcileInterval
	}
	return &ReconcileJob{p: p, every: every}
}

func (j *ReconcileJob) Name() string         { return "reconcile" }
func (j *ReconcileJob) Every() time.Duration { return j.every }
func (j *ReconcileJob) Step(ctx context.Context, t Term, _ time.Time) error {
	_, err := j.p.Reconcile(ctx, t.Fence)
	return err
}
