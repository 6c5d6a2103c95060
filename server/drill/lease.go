package drill

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"gorm.io/gorm"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/internal/oneline"
	"github.com/switchyard-io/switchyard/sdk/wire"
	"github.com/switchyard-io/switchyard/server"
)

// A run's override lives under an etcd lease from its first write: the
// leader keeps the lease alive while it leads, revokes it when the run
// reverts or the term ends, and etcd expires it if the leader dies, so
// the override never outlives its leader by more than the TTL. Here: the
// keepers of the leases, and the run's phases that write, take back or
// lose its override (start, apply, revert, interrupt).

// keeper keeps one run's override lease alive for one term.
type keeper struct {
	term    int64
	lease   clientv3.LeaseID
	cancel  context.CancelFunc
	lost    atomic.Bool // the lease ended while the keeper ran
	stopped atomic.Bool // the run removed its override itself
}

// holds reports whether this term keeps the run's lease alive.
func (j *Job) holds(runID, term int64) (*keeper, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	k := j.keepers[runID]
	return k, k != nil && k.term == term
}

// keep keeps the lease alive for the term: when the term ends (or this
// console stops) the keeper revokes it, and if this console dies etcd
// expires it, so the override never outlives its leader by more than the
// TTL.
func (j *Job) keep(ctx context.Context, term, runID int64, lease clientv3.LeaseID) *keeper {
	kctx, cancel := context.WithCancel(ctx)
	k := &keeper{term: term, lease: lease, cancel: cancel}
	j.mu.Lock()
	if old := j.keepers[runID]; old != nil {
		old.cancel()
	}
	j.keepers[runID] = k
	j.mu.Unlock()
	ch, err := j.s.cfg.Etcd.KeepAlive(kctx, lease)
	if err != nil {
		k.lost.Store(true)
		return k
	}
	go func() {
		for range ch {
		}
		switch {
		case kctx.Err() == nil:
			k.lost.Store(true) // expired or revoked
		case ctx.Err() != nil && !k.stopped.Load():
			j.revoke(lease) // the term ended: give the fleet back now
		}
	}()
	return k
}

// drop forgets the keeper of a finished or reverted run.
func (j *Job) drop(runID int64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if k := j.keepers[runID]; k != nil {
		k.stopped.Store(true)
		k.cancel()
		delete(j.keepers, runID)
	}
}

// revoke revokes a lease, best effort (etcd expires it anyway).
func (j *Job) revoke(id clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := j.s.cfg.Etcd.Revoke(ctx, id); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		j.s.cfg.Logger.Warn("drill: revoke the override lease", "lease", fmt.Sprintf("%x", int64(id)), "err", err)
	}
}

// deleteOverride removes the run's override if it is still the one under
// the run's lease, in one fenced transaction, and returns the revision of
// the delete (0 when the override was gone already).
func (j *Job) deleteOverride(ctx context.Context, t server.Term, r *Run) (int64, error) {
	key := wire.OverrideKey(j.s.cfg.Namespace, r.App, r.SwitchName)
	tctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	resp, err := j.s.cfg.Etcd.Txn(tctx).If(t.Fence.Cmp(), clientv3.Compare(clientv3.LeaseValue(key), "=", r.LeaseID)).
		Then(clientv3.OpDelete(key)).Commit()
	if err != nil {
		return 0, fmt.Errorf("remove the override: %w", err)
	}
	if resp.Succeeded {
		return resp.Header.Revision, nil
	}
	// Either the fence or the lease compare failed; which one?
	cresp, err := j.s.cfg.Etcd.Txn(tctx).If(t.Fence.Cmp()).Commit()
	if err != nil {
		return 0, fmt.Errorf("remove the override: %w", err)
	}
	if !cresp.Succeeded {
		return 0, fmt.Errorf("%w: the override was not removed", server.ErrNotLeader)
	}
	return 0, nil
}

// start runs the preflight and the baseline probes and, when both pass,
// applies the override: a lease is granted, the run records it (and the
// start is audited), the leader keeps the lease alive, and the override is
// written under it in one fenced transaction.
func (j *Job) start(ctx context.Context, t server.Term, r *Run, p *Progress, pl *plan) error {
	if j.underway(r.ID, t.Rev, stageBaseline) {
		return nil // the step after they are done goes on
	}
	// The preflight is checked before the baseline rounds start and again
	// once they are done, so it still holds when the override is written.
	checks, sw := j.preflight(ctx, r, pl)
	p.Preflight = checks
	if failed := failedChecks(checks); failed != "" {
		return j.close(ctx, t, r, p, OutcomeRefused, "refused by the preflight: "+failed)
	}
	rounds, done, err := j.probe(ctx, t.Rev, r, stageBaseline, pl, pl.roundBudget())
	if err != nil || !done {
		return err // the run stays pending until its baseline is in
	}
	p.Baseline = rounds
	for _, b := range p.Baseline {
		if b.Failures > 0 {
			if r.DryRun {
				return j.close(ctx, t, r, p, OutcomeFailed, "dry run: the undegraded path fails its probe: "+b.describe())
			}
			return j.close(ctx, t, r, p, OutcomeRefused, "refused: the undegraded path already fails its probe, so the fallback cannot be judged: "+b.describe())
		}
	}
	if r.DryRun {
		return j.close(ctx, t, r, p, OutcomePassed, "dry run: the preflight passed and the undegraded path answers every probe as expected")
	}
	p.SwitchVersion = sw.Version
	p.recordBaseline(j.fleet(r, pl))
	if pl.capacity != nil {
		p.LoadBefore = j.measureLoad(ctx, r.App, pl.capacity, j.s.cfg.Service.Now())
	}
	value := sw.Wire()
	value.State, value.Rollout = wire.StateOn, pl.rollout
	val, err := json.Marshal(value)
	if err != nil {
		return err
	}
	cli := j.s.cfg.Etcd
	gctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	grant, err := cli.Grant(gctx, int64(j.s.cfg.LeaseTTL/time.Second))
	cancel()
	if err != nil {
		return fmt.Errorf("grant the override lease: %w", err) // etcd away: the next step tries again
	}
	now := j.s.cfg.Service.Now()
	p.LeaseTTLSeconds = grant.TTL
	p.note(now, "preflight passed; lease %x (TTL %ds) granted", int64(grant.ID), grant.TTL)
	r.LeaseID, r.StartedAt = int64(grant.ID), &now
	err = j.save(ctx, t, r, p, func(tx *server.JobTx) error {
		tx.DB().Model(&Run{}).Where("id = ?", r.ID).Updates(map[string]any{"phase": PhaseApplying, "lease_id": r.LeaseID, "started_at": now})
		return tx.Commit(server.Audited{Actor: server.JobActor(audit.ActorDrill, r.Cause()), Action: audit.DrillStart, App: r.App,
			Reason: oneline.Clean(fmt.Sprintf("run #%d of drill %s (%s): %s on for %s of %s/%s for %s", r.Number, r.Drill, startedBy(r), value.Level,
				describeTarget(pl.rollout), r.App, r.SwitchName, pl.duration), maxReason),
			Apply: func(*gorm.DB) (string, any, any, error) { return r.target(), nil, r.View(), nil }})
	})
	if err != nil {
		j.revoke(grant.ID)
		return err
	}
	r.Phase = PhaseApplying
	k := j.keep(ctx, t.Rev, r.ID, grant.ID)
	return j.apply(ctx, t, r, p, k, string(val))
}

// apply writes the override under the run's lease and records the run as
// active.
func (j *Job) apply(ctx context.Context, t server.Term, r *Run, p *Progress, k *keeper, val string) error {
	key := wire.OverrideKey(j.s.cfg.Namespace, r.App, r.SwitchName)
	tctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	resp, err := j.s.cfg.Etcd.Txn(tctx).If(t.Fence.Cmp()).Then(clientv3.OpPut(key, val, clientv3.WithLease(k.lease))).Commit()
	cancel()
	switch {
	case err != nil:
		return fmt.Errorf("write the override: %w", err) // the next step sees applying and tries again
	case !resp.Succeeded:
		return fmt.Errorf("%w: the override was not written", server.ErrNotLeader)
	}
	now := j.s.cfg.Service.Now()
	p.OverrideRevision, p.AppliedAt = resp.Header.Revision, &now
	p.note(now, "override written at etcd revision %d", resp.Header.Revision)
	r.Phase = PhaseActive
	return j.save(ctx, t, r, p, nil)
}

// resumeApply finishes a start whose override write (or its record) failed
// earlier in this term.
func (j *Job) resumeApply(ctx context.Context, t server.Term, r *Run, p *Progress, k *keeper) error {
	sw, err := j.s.cfg.Service.GetSwitch(ctx, r.App, r.SwitchName)
	if err != nil {
		return err
	}
	pl, err := r.plan()
	if err != nil {
		return err
	}
	value := sw.Wire()
	value.State, value.Rollout = wire.StateOn, pl.rollout
	val, _ := json.Marshal(value)
	return j.apply(ctx, t, r, p, k, string(val))
}

// revert removes the override (an abort or the end of the duration) and
// starts watching the fleet recover.
func (j *Job) revert(ctx context.Context, t server.Term, r *Run, p *Progress) error {
	rev, err := j.deleteOverride(ctx, t, r)
	if err != nil {
		return err
	}
	j.drop(r.ID)
	j.revoke(clientv3.LeaseID(r.LeaseID))
	now := j.s.cfg.Service.Now()
	if rev == 0 {
		rev = p.OverrideRevision + 1 // it vanished with its lease, at a revision etcd does not tell
	}
	p.RevertRevision, p.RevertedAt = rev, &now
	p.RevertReason = cmpOr(p.AbortReason, "the drill's duration is over")
	p.note(now, "override removed at etcd revision %d: %s", rev, p.RevertReason)
	r.Phase, r.RevertedAt = PhaseRecovering, &now
	return j.save(ctx, t, r, p, func(tx *server.JobTx) error {
		if !p.AbortByCondition {
			return nil
		}
		return tx.Commit(server.Audited{Actor: server.JobActor(audit.ActorDrill, r.Cause()), Action: audit.DrillAbort, App: r.App,
			Reason: oneline.Clean(p.AbortReason, maxReason), Apply: func(*gorm.DB) (string, any, any, error) { return r.target(), nil, r.View(), nil }})
	})
}

// interrupt ends a run that an earlier term left applying or active: the
// leader that ran it is gone (or this console lost its term meanwhile). If
// its lease still exists the override is removed now; otherwise etcd
// expired it and the fleet reverted by itself. Either way the run is
// recorded as interrupted, never resumed: a new leader cannot vouch for
// what it did not watch.
func (j *Job) interrupt(ctx context.Context, t server.Term, r *Run, p *Progress) error {
	var how string
	if r.LeaseID == 0 {
		how = "no override had been written"
	} else {
		tctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		ttl, err := j.s.cfg.Etcd.TimeToLive(tctx, clientv3.LeaseID(r.LeaseID))
		cancel()
		if err != nil {
			return fmt.Errorf("look up the override lease: %w", err)
		}
		if ttl.TTL > 0 {
			if _, err := j.deleteOverride(ctx, t, r); err != nil {
				return err
			}
			j.revoke(clientv3.LeaseID(r.LeaseID))
			how = fmt.Sprintf("its lease still had %ds to live; %s removed the override", ttl.TTL, t.Holder)
		} else {
			how = "its lease was already gone (revoked when the console stopped, or expired), so the fleet had reverted by itself"
		}
	}
	now := j.s.cfg.Service.Now()
	r.RevertedAt = &now
	p.note(now, "interrupted: %s", how)
	return j.close(ctx, t, r, p, OutcomeInterrupted, "interrupted: the console running it stopped leading mid-run; "+how)
}
