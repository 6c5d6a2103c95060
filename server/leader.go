package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/switchyard-io/switchyard/sdk/wire"
)

// SchedulerConfig configures the leader-only background jobs.
type SchedulerConfig struct {
	Namespace string
	// ID names this console in the election (host:port is a good choice).
	ID string
	// SessionTTL is the election lease, in whole seconds (default 1s): a
	// leader that dies without resigning is replaced once etcd expires it,
	// within about TTL + 0.5 s. etcd raises a TTL below its minimum (1.5 ×
	// its election timeout, rounded up: 2 s at etcd's default 1000 ms); the
	// scheduler logs a warning when it does.
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

	// Run's goroutine only:
	orphan    clientv3.LeaseID // lease of an ended term that etcd did not revoke
	ttlWarned bool             // etcd's raised TTL was logged
}

// Pauses between campaigns: retryMin after a term that led, doubling while
// campaigns fail, up to retryMax.
const (
	retryMin = 100 * time.Millisecond
	retryMax = time.Second
)

// NewScheduler returns a scheduler; Run starts it.
func NewScheduler(cli *clientv3.Client, pub *Publisher, c SchedulerConfig) *Scheduler {
	if c.SessionTTL == 0 {
		c.SessionTTL = time.Second
	}
	// etcd leases count whole seconds; below one the lease would silently
	// fall back to etcd's 60 s default.
	c.SessionTTL = max(c.SessionTTL.Truncate(time.Second), time.Second)
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

// Run campaigns until ctx ends. On return any leadership has been given up.
func (s *Scheduler) Run(ctx context.Context) {
	backoff := retryMin
	for ctx.Err() == nil {
		led, err := s.term(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			s.cfg.Logger.Warn("scheduler: election", "err", err)
		}
		if led {
			// A won campaign shows etcd works again: the next one must not
			// wait out the failures of earlier outages.
			backoff = retryMin
		}
		// Jittered, capped backoff before campaigning again.
		d := backoff/2 + rand.N(backoff/2+1)
		select {
		case <-ctx.Done():
			return
		case <-time.After(d):
		}
		backoff = min(backoff*2, retryMax)
	}
}

// term is one election session: revoke what an earlier term left behind,
// campaign, lead until the session or ctx ends, revoke the session's lease.
// led reports whether the campaign was won.
func (s *Scheduler) term(ctx context.Context) (led bool, err error) {
	if err := s.revokeOrphan(ctx); err != nil {
		return false, err
	}
	sess, err := s.newSession(ctx)
	if err != nil {
		return false, err
	}
	defer s.release(sess)
	el := concurrency.NewElection(sess, wire.ElectionKey(s.cfg.Namespace))
	termCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-sess.Done():
		case <-termCtx.Done():
		}
		cancel()
	}()
	if err := el.Campaign(termCtx, s.cfg.ID); err != nil {
		return false, err
	}
	fence := NewFence(el.Key(), el.Rev())
	s.setLeading(true)
	s.cfg.Logger.Info("scheduler: leading", "id", s.cfg.ID)
	err = s.lead(termCtx, fence)
	s.setLeading(false)
	s.cfg.Logger.Info("scheduler: stepped down", "id", s.cfg.ID)
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return true, err
}

// newSession grants the election lease and keeps it alive.
func (s *Scheduler) newSession(ctx context.Context) (*concurrency.Session, error) {
	ttl := int64(s.cfg.SessionTTL / time.Second)
	grant, err := s.cli.Grant(ctx, ttl)
	if err != nil {
		return nil, err
	}
	if grant.TTL > ttl && !s.ttlWarned {
		s.ttlWarned = true
		s.cfg.Logger.Warn("scheduler: etcd raised the election TTL to its minimum lease TTL (1.5 × its election timeout, rounded up); a crashed leader is replaced only after that long",
			"asked", s.cfg.SessionTTL, "granted", time.Duration(grant.TTL)*time.Second)
	}
	sess, err := concurrency.NewSession(s.cli, concurrency.WithLease(grant.ID), concurrency.WithContext(ctx))
	if err != nil {
		s.revoke(grant.ID)
		return nil, err
	}
	return sess, nil
}

// release stops renewing sess and revokes its lease, which deletes the
// election key at once, so a follower takes over without waiting for the
// TTL.
func (s *Scheduler) release(sess *concurrency.Session) {
	sess.Orphan()
	s.revoke(sess.Lease())
}

// revoke revokes a lease of this scheduler. If etcd does not answer within
// the TTL the lease is remembered, and the next term revokes it as soon as
// etcd answers: an etcd that restarts renews every lease it held, so the
// dead term's election key would otherwise hold up every campaign, this
// console's and the others', for another TTL after etcd is back.
func (s *Scheduler) revoke(id clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.SessionTTL)
	defer cancel()
	if err := s.revokeLease(ctx, id); err != nil {
		s.orphan = id
		s.cfg.Logger.Warn("scheduler: election lease not revoked; revoking it when etcd answers", "lease", fmt.Sprintf("%x", int64(id)), "err", err)
	}
}

// revokeOrphan revokes the lease an earlier term could not, waiting for
// etcd as long as ctx allows.
func (s *Scheduler) revokeOrphan(ctx context.Context) error {
	if s.orphan == clientv3.NoLease {
		return nil
	}
	if err := s.revokeLease(ctx, s.orphan); err != nil {
		return fmt.Errorf("server: revoke the election lease of the last term: %w", err)
	}
	s.cfg.Logger.Info("scheduler: revoked the election lease of the last term", "lease", fmt.Sprintf("%x", int64(s.orphan)))
	s.orphan = clientv3.NoLease
	return nil
}

// revokeLease revokes id; a lease etcd no longer knows counts as revoked.
func (s *Scheduler) revokeLease(ctx context.Context, id clientv3.LeaseID) error {
	_, err := s.cli.Revoke(ctx, id)
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
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
