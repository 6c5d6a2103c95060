package sdk

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/switchyard-io/switchyard/sdk/ack"
	"github.com/switchyard-io/switchyard/sdk/wire"
)

// The registry polls the applied revision every debounceMin plus up to
// debounceJitter, and writes it (acks it) when its ack.Schedule says so;
// a pending ack shortens the poll to its due time. Applying a change wakes
// nothing (no channel send, no timer reset).
const (
	debounceMin    = ack.Quiet
	debounceJitter = 500 * time.Millisecond
)

// registry keeps the lease-bound instance key up to date. It grants a
// lease and keeps it alive over one long-lived keepalive stream (renewals
// every LeaseTTL/3); the renewals double as the liveness check behind
// Stale. After the lease is lost it grants a new one and registers again.
// The applied revision is written after it changes (see ack.Schedule), and
// fleet-signal reports as reporter.due decides.
func (c *Client) registry() {
	defer c.wg.Done()
	var (
		lease   clientv3.LeaseID
		kaCh    <-chan *clientv3.LeaseKeepAliveResponse
		kaStop  context.CancelFunc = func() {}
		dirty                      = true
		lastAck                    = time.Now()
	)
	defer func() { kaStop() }()
	period := c.cfg.LeaseTTL / 3
	tick := time.NewTicker(period / 2)
	defer tick.Stop()
	// The applied revision is polled rather than signalled, so applying a
	// change wakes nothing else; a pending ack shortens the poll to its
	// due time.
	pollPeriod := func() time.Duration { return debounceMin + rand.N(debounceJitter) }
	ackPoll := time.NewTimer(pollPeriod())
	defer ackPoll.Stop()
	var acked int64
	var sched ack.Schedule
	rep := c.report
	// reportTimer wakes the registry when a periodic report is due; the
	// ack poll also checks for follow-up reports.
	reportTimer := time.NewTimer(c.cfg.ReportInterval)
	defer reportTimer.Stop()

	rpc := func(f func(ctx context.Context) error) error {
		ctx, cancel := context.WithTimeout(c.ctx, min(c.cfg.DialTimeout, period))
		defer cancel()
		return f(ctx)
	}
	setReachable := func(ok bool, err error) {
		if c.reachable.Swap(ok) != ok {
			if ok {
				c.log.Info("etcd reachable again")
			} else if c.ctx.Err() == nil { // a client being closed is not an outage
				c.log.Warn("etcd unreachable, serving last known state", "err", err)
			}
		}
		if ok && c.sessionUp.Load() {
			c.freshAt.Store(time.Now().UnixNano())
		}
	}
	// put writes the instance value with a report. After a failed write
	// an ack is retried at the next poll, a registration (dirty) at the
	// next poll or keepalive, and the report's changes go out with the next
	// report, an interval later.
	put := func() {
		if lease == 0 {
			rep.failed(rep.now()) // no key to write until registered
			return
		}
		now := rep.now()
		d := rep.take(now)
		err := rpc(func(ctx context.Context) error {
			_, err := c.etcd.Put(ctx, wire.InstanceKey(c.cfg.Namespace, c.cfg.App, c.cfg.InstanceID),
				string(d.value), clientv3.WithLease(lease))
			return err
		})
		if err != nil {
			c.log.Debug("instance registry write failed", "err", err)
			rep.failed(now)
			return
		}
		switch {
		case dirty:
			sched.Registered()
		case d.rev != acked:
			sched.Acked(now)
		}
		rep.commit(d, now, d.rev != acked)
		dirty, acked = false, d.rev
	}
	// step asks the report policy and writes when it says so.
	step := func(ackDue bool) {
		if rep.due(rep.now(), dirty, ackDue) != reportNone {
			put()
		}
		reportTimer.Reset(max(rep.nextAt.Sub(rep.now()), 0))
	}
	register := func() {
		var id clientv3.LeaseID
		err := rpc(func(ctx context.Context) error {
			g, err := c.etcd.Grant(ctx, int64(c.cfg.LeaseTTL/time.Second))
			if err == nil {
				id = g.ID
			}
			return err
		})
		if err != nil {
			setReachable(false, err)
			return
		}
		kaCtx, cancel := context.WithCancel(c.ctx)
		ch, err := c.etcd.KeepAlive(kaCtx, id)
		if err != nil {
			cancel()
			setReachable(false, err)
			return
		}
		kaStop, kaCh, lease, dirty, lastAck = cancel, ch, id, true, time.Now()
		setReachable(true, nil)
		put()
	}

	register()
	for {
		select {
		case <-c.ctx.Done():
			if lease != 0 {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				c.etcd.Revoke(ctx, lease)
				cancel()
			}
			return
		case resp, ok := <-kaCh:
			if !ok {
				// The lease expired or was revoked: register again.
				c.log.Info("instance lease lost, registering again")
				kaStop()
				kaCh, lease = nil, 0
				register()
				continue
			}
			if resp != nil {
				lastAck = time.Now()
				setReachable(true, nil)
				if dirty {
					step(false)
				}
			}
		case <-ackPoll.C:
			due := sched.Due(c.Revision() != acked, time.Unix(0, c.appliedAt.Load()))
			now := time.Now()
			ackDue := !due.IsZero() && !now.Before(due)
			step(ackDue)
			wait := pollPeriod() // also the retry of an ack that failed
			if !due.IsZero() && !ackDue {
				wait = min(wait, due.Sub(now))
			}
			ackPoll.Reset(wait)
		case <-reportTimer.C:
			step(false)
		case <-tick.C:
			if lease == 0 {
				register()
			} else if time.Since(lastAck) > period+period/2+time.Second {
				setReachable(false, errors.New("sdk: no lease keepalive answer"))
			}
		}
	}
}

// instance is this instance's registry entry, without a report.
func (c *Client) instance() wire.Instance {
	inst := wire.Instance{
		App:             c.cfg.App,
		InstanceID:      c.cfg.InstanceID,
		Labels:          c.cfg.Labels,
		SDKVersion:      Version,
		AppliedRevision: c.Revision(),
		StartedAt:       c.startedAt.UTC(),
		Stats:           map[string]int64{"fallbacks_served": int64(c.fallbacksServed())},
		ReportInterval:  wire.Duration(c.cfg.ReportInterval),
	}
	if at := c.appliedAt.Load(); at != 0 {
		inst.AppliedAt = time.Unix(0, at).UTC()
	}
	return inst
}

// fallbacksServed sums the answers given without any published value, by
// Client.On and by every handle.
func (c *Client) fallbacksServed() uint64 {
	n := c.fallbacks.Load()
	for _, s := range c.state.Load().sigs {
		n += s.served.Load()
	}
	return n
}
