package server

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/switchyard-io/switchyard/sdk/wire"
)

// SchedulerConfig configures the leader-only background jobs.
type SchedulerConfig struct {
	Namespace string
	// ID names this console in the election (host:port is a good choice).
	ID string
	// SessionTTL is the election lease; a dead leader is replaced after at
	// most this long (default 5s).
	SessionTTL time.Duration
	// ReconcileInterval is the period of full reconciliation (default 30s).
	ReconcileInterval time.Duration
	// DrainInterval is how often the outbox is polled when nothing kicks the
	// publisher (default 250ms): it picks up other consoles' changes.
	DrainInterval time.Duration
	Logger        *slog.Logger
}

// Scheduler campaigns for the namespace's scheduler election and, while it
// leads, runs the publisher and the reconciler. Several consoles can run it;
// exactly one leads.
type Scheduler struct {
	cli     *clientv3.Client
	pub     *Publisher
	cfg     SchedulerConfig
	leading atomic.Bool
}

// NewScheduler returns a scheduler; Run starts it.
func NewScheduler(cli *clientv3.Client, pub *Publisher, c SchedulerConfig) *Scheduler {
	if c.SessionTTL == 0 {
		c.SessionTTL = 5 * time.Second
	}
	// etcd leases count whole seconds; below one the lease would silently
	// fall back to etcd's 60 s default.
	c.SessionTTL = max(c.SessionTTL, time.Second)
	if c.ReconcileInterval == 0 {
		c.ReconcileInterval = 30 * time.Second
	}
	if c.DrainInterval == 0 {
		c.DrainInterval = 250 * time.Millisecond
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return &Scheduler{cli: cli, pub: pub, cfg: c}
}

// Leading reports whether this console currently holds the election.
func (s *Scheduler) Leading() bool { return s.leading.Load() }

// Run campaigns until ctx ends. On return any leadership has been resigned.
func (s *Scheduler) Run(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := s.term(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			s.cfg.Logger.Warn("scheduler: election", "err", err)
		}
		// Jittered, capped backoff before campaigning again.
		d := backoff/2 + rand.N(backoff/2+1)
		select {
		case <-ctx.Done():
			return
		case <-time.After(d):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

// term is one election session: campaign, lead until the session or ctx
// ends, resign.
func (s *Scheduler) term(ctx context.Context) error {
	sess, err := concurrency.NewSession(s.cli, concurrency.WithTTL(int(s.cfg.SessionTTL/time.Second)), concurrency.WithContext(ctx))
	if err != nil {
		return err
	}
	defer sess.Close()
	el := concurrency.NewElection(sess, wire.ElectionKey(s.cfg.Namespace))
	campaignCtx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-sess.Done():
		case <-campaignCtx.Done():
		}
		cancel()
	}()
	if err := el.Campaign(campaignCtx, s.cfg.ID); err != nil {
		cancel()
		return err
	}
	fence := NewFence(el.Key(), el.Rev())
	s.setLeading(true)
	s.cfg.Logger.Info("scheduler: leading", "id", s.cfg.ID)
	err = s.lead(campaignCtx, fence)
	s.setLeading(false)
	cancel()
	rctx, rcancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer rcancel()
	_ = el.Resign(rctx)
	s.cfg.Logger.Info("scheduler: stepped down", "id", s.cfg.ID)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

func (s *Scheduler) setLeading(v bool) {
	s.leading.Store(v)
	s.pub.setLeading(v)
	if v {
		s.pub.metrics.Leader.Set(1)
	} else {
		s.pub.metrics.Leader.Set(0)
	}
}

// lead runs the publisher and reconciler until ctx ends or leadership is lost.
func (s *Scheduler) lead(ctx context.Context, f Fence) error {
	reconcile := time.NewTicker(s.cfg.ReconcileInterval)
	defer reconcile.Stop()
	drain := time.NewTicker(s.cfg.DrainInterval)
	defer drain.Stop()
	run := func(full bool) error {
		var err error
		if full {
			_, err = s.pub.Reconcile(ctx, f)
		} else {
			err = s.pub.Drain(ctx, f)
		}
		if errors.Is(err, errNotLeader) {
			return err
		}
		if err != nil && ctx.Err() == nil {
			s.cfg.Logger.Warn("scheduler: publish", "err", err)
		}
		return nil
	}
	if err := run(true); err != nil {
		return err
	}
	for {
		var err error
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.pub.kick:
			err = run(false)
		case <-drain.C:
			err = run(false)
		case <-reconcile.C:
			err = run(true)
		}
		if err != nil {
			return err
		}
	}
}
