package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/switchyard-io/switchyard/sdk/wire"
)

// Registry debounce: an applied revision is reported after a random delay
// in [debounceMin, debounceMin+debounceJitter), so a flip reaching
// thousands of instances spreads their writes instead of bursting etcd.
const (
	debounceMin    = 50 * time.Millisecond
	debounceJitter = 200 * time.Millisecond
)

// registry keeps the lease-bound instance key up to date: it grants a
// lease, renews it every LeaseTTL/3 (which doubles as the liveness check
// behind Stale), re-grants and re-registers after the lease is lost, and
// writes the applied revision after it changes, debounced with jitter.
func (c *Client) registry() {
	defer c.wg.Done()
	var lease clientv3.LeaseID
	dirty := true
	heartbeat := time.NewTicker(c.cfg.LeaseTTL / 3)
	defer heartbeat.Stop()
	debounce := time.NewTimer(time.Hour)
	debounce.Stop()
	pending := false

	rpc := func(f func(ctx context.Context) error) error {
		ctx, cancel := context.WithTimeout(c.ctx, min(c.cfg.DialTimeout, c.cfg.LeaseTTL/3))
		defer cancel()
		return f(ctx)
	}
	put := func() {
		if lease == 0 {
			return
		}
		err := rpc(func(ctx context.Context) error {
			_, err := c.etcd.Put(ctx, wire.InstanceKey(c.cfg.Namespace, c.cfg.App, c.cfg.InstanceID),
				string(c.instanceValue()), clientv3.WithLease(lease))
			return err
		})
		if err != nil {
			if errors.Is(err, rpctypes.ErrLeaseNotFound) {
				lease = 0
			}
			c.log.Debug("instance registry write failed", "err", err)
			return
		}
		dirty = false
	}
	beat := func() {
		var err error
		if lease != 0 {
			err = rpc(func(ctx context.Context) error {
				_, err := c.etcd.KeepAliveOnce(ctx, lease)
				return err
			})
			if errors.Is(err, rpctypes.ErrLeaseNotFound) {
				c.log.Info("instance lease lost, registering again")
				lease, dirty, err = 0, true, nil
			}
		}
		if lease == 0 && err == nil {
			err = rpc(func(ctx context.Context) error {
				g, err := c.etcd.Grant(ctx, int64(c.cfg.LeaseTTL/time.Second))
				if err == nil {
					lease, dirty = g.ID, true
				}
				return err
			})
		}
		if err != nil {
			if c.reachable.Swap(false) {
				c.log.Warn("etcd unreachable, serving last known state", "err", err)
			}
			return
		}
		if !c.reachable.Swap(true) {
			c.log.Info("etcd reachable again")
		}
		if c.sessionUp.Load() {
			c.freshAt.Store(time.Now().UnixNano())
		}
		if dirty {
			put()
		}
	}

	beat()
	for {
		select {
		case <-c.ctx.Done():
			if lease != 0 {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				c.etcd.Revoke(ctx, lease)
				cancel()
			}
			return
		case <-c.regKick:
			dirty = true
			if !pending {
				pending = true
				debounce.Reset(debounceMin + rand.N(debounceJitter))
			}
		case <-debounce.C:
			pending = false
			if dirty {
				put()
			}
		case <-heartbeat.C:
			beat()
		}
	}
}

// instanceValue is the JSON of this instance's registry entry.
func (c *Client) instanceValue() []byte {
	inst := wire.Instance{
		App:             c.cfg.App,
		InstanceID:      c.cfg.InstanceID,
		Labels:          c.cfg.Labels,
		SDKVersion:      Version,
		AppliedRevision: c.Revision(),
		StartedAt:       c.startedAt.UTC(),
		Stats:           map[string]int64{"fallbacks_served": int64(c.fallbacksServed())},
	}
	if at := c.appliedAt.Load(); at != 0 {
		inst.AppliedAt = time.Unix(0, at).UTC()
	}
	b, _ := json.Marshal(inst)
	return b
}

// fallbacksServed sums the fallbacks served by Client.On and every handle.
func (c *Client) fallbacksServed() uint64 {
	n := c.fallbacks.Load()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.served {
		n += s.Load()
	}
	return n
}
