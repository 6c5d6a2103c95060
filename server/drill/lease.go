package drill

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/switchyard-io/switchyard/sdk/wire"
	"github.com/switchyard-io/switchyard/server"
)

// A run's override lives under an etcd lease from its first write: the
// leader keeps the lease alive while it leads, revokes it when the run
// reverts or the term ends, and etcd expires it if the leader dies, so
// the override never outlives its leader by more than the TTL.

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
