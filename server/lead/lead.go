// Package lead is the consoles' election and the leader's job runner.
// Every console campaigns for the namespace's scheduler election; the one
// that leads runs the registered jobs — publisher, reconciler, and the
// leader jobs of every domain (rollouts, triggers, drills, expiry,
// notifications) — each on its own goroutine, with the time passed in.
//
// A term is fenced twice: in etcd (every write compares the election key)
// and in the database (the new leader claims its term, and a job's
// transaction commits only within it; see server.InTerm). A job keeps its
// durable state in the database, so a new leader resumes where the old one
// stopped, and never applies a step twice.
package lead

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/switchyard-io/switchyard/sdk/wire"
	"github.com/switchyard-io/switchyard/server"
)

// Config configures a Scheduler.
type Config struct {
	Namespace string
	// ID names this console in the election (host:port is a good choice).
	ID string
	// SessionTTL is the election lease, in whole seconds (default 1s): a
	// leader that dies without resigning is replaced once etcd expires it,
	// within about TTL + 0.5 s. etcd raises a TTL below its minimum (1.5 ×
	// its election timeout, rounded up: 2 s at etcd's default 1000 ms); the
	// scheduler logs a warning when it does.
	SessionTTL time.Duration
	// Now is the clock the jobs' steps are given (default time.Now).
	Now    func() time.Time
	Logger *slog.Logger
	// OnLeading is told when this console starts (true) and stops (false)
	// leading.
	OnLeading func(leading bool)
	// JobPanics counts the job steps that panicked, by job (nil: not
	// counted; server.Metrics.JobPanics).
	JobPanics *prometheus.CounterVec
}

// Claimer records a new term in the database (server.Service).
type Claimer interface {
	ClaimTerm(ctx context.Context, t server.Term) error
	CurrentTerm(ctx context.Context) (rev int64, holder string, err error)
	ReplaceTerm(ctx context.Context, stale int64, t server.Term) error
}

// Scheduler campaigns for the namespace's scheduler election and, while it
// leads, runs the registered jobs. Several consoles can run it; exactly one
// leads.
type Scheduler struct {
	cli     *clientv3.Client
	claim   Claimer
	cfg     Config
	leading atomic.Bool
	jobs    jobSet

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

// New returns a scheduler that claims its terms through claim; add jobs
// with Add, start it with Run.
func New(cli *clientv3.Client, claim Claimer, c Config) *Scheduler {
	if c.SessionTTL == 0 {
		c.SessionTTL = time.Second
	}
	// etcd leases count whole seconds; below one the lease would silently
	// fall back to etcd's 60 s default.
	c.SessionTTL = max(c.SessionTTL.Truncate(time.Second), time.Second)
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.OnLeading == nil {
		c.OnLeading = func(bool) {}
	}
	return &Scheduler{cli: cli, claim: claim, cfg: c}
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
	t := server.Term{Rev: el.Rev(), Holder: s.cfg.ID, Fence: server.NewFence(el.Key(), el.Rev())}
	// The database learns the term before any job acts in it: from now on
	// a deposed leader's job transactions fail.
	if err := s.claimTerm(termCtx, t); err != nil {
		return true, fmt.Errorf("lead: claim term %d: %w", t.Rev, err)
	}
	s.setLeading(true)
	s.cfg.Logger.Info("scheduler: leading", "id", s.cfg.ID, "term", t.Rev)
	err = s.jobs.run(termCtx, t, s.cfg)
	s.setLeading(false)
	s.cfg.Logger.Info("scheduler: stepped down", "id", s.cfg.ID, "term", t.Rev)
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
		return fmt.Errorf("lead: revoke the election lease of the last term: %w", err)
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
	s.cfg.OnLeading(v)
}

// claimTerm records t in the database. A recorded term newer than t is
// normally a newer leader's, and t may not act. But when that term has no
// election key in etcd and t's key leads the election, the recorded term
// is dead — typically etcd was restored or replaced and its revisions
// started again, so no new leader would ever be newer — and t replaces it
// (compare and set; a job of the dead term cannot commit after that).
func (s *Scheduler) claimTerm(ctx context.Context, t server.Term) error {
	err := s.claim.ClaimTerm(ctx, t)
	if !errors.Is(err, server.ErrNotLeader) {
		return err
	}
	rev, holder, cerr := s.claim.CurrentTerm(ctx)
	if cerr != nil {
		return err
	}
	resp, gerr := s.cli.Get(ctx, wire.ElectionKey(s.cfg.Namespace), clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if gerr != nil || len(resp.Kvs) == 0 {
		return err
	}
	lowest := resp.Kvs[0].CreateRevision
	for _, kv := range resp.Kvs {
		if kv.CreateRevision == rev {
			return err // the newer term's leader is alive
		}
		lowest = min(lowest, kv.CreateRevision)
	}
	if lowest != t.Rev {
		return err // this console no longer leads
	}
	s.cfg.Logger.Warn("scheduler: the database records a term that has no election key in etcd (etcd restored or replaced?); taking over",
		"recorded", rev, "holder", holder, "term", t.Rev)
	return s.claim.ReplaceTerm(ctx, rev, t)
}
