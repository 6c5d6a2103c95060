package sdk

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Reconnect backoff bounds; each wait is jittered to [d/2, d).
const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 10 * time.Second
)

var errCompacted = errors.New("sdk: watch revision compacted")

// run lists and watches until Close, re-listing after compaction and
// reconnecting with capped exponential backoff and jitter after errors.
func (c *Client) run() {
	defer c.wg.Done()
	backoff := minBackoff
	for {
		listed, err := c.session()
		c.sessionUp.Store(false)
		if c.ctx.Err() != nil {
			return
		}
		if listed {
			backoff = minBackoff
		}
		if errors.Is(err, errCompacted) {
			c.relists.Add(1)
			c.log.Info("watch revision compacted, re-listing")
			continue
		}
		c.watchErrors.Add(1)
		wait := backoff/2 + rand.N(backoff/2)
		c.log.Warn("etcd watch interrupted, serving last known state", "err", err, "retry_in", wait)
		t := time.NewTimer(wait)
		select {
		case <-c.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(backoff*2, maxBackoff)
	}
}

// session lists every watched prefix in one transaction (one revision R),
// applies the listing, then watches from R+1 until something breaks.
// listed reports whether the listing succeeded.
func (c *Client) session() (listed bool, err error) {
	ops := make([]clientv3.Op, len(c.prefixes))
	for i, p := range c.prefixes {
		ops[i] = clientv3.OpGet(p, clientv3.WithPrefix())
	}
	lctx, cancel := context.WithTimeout(c.ctx, c.cfg.DialTimeout)
	resp, err := c.etcd.Txn(clientv3.WithRequireLeader(lctx)).Then(ops...).Commit()
	cancel()
	if err != nil {
		return false, err
	}
	rev := resp.Header.Revision
	var ups []kvUpdate
	for _, r := range resp.Responses {
		for _, kv := range r.GetResponseRange().Kvs {
			ups = append(ups, kvUpdate{key: string(kv.Key), value: kv.Value, modRev: kv.ModRevision})
		}
	}
	c.apply(ups, true, rev, SourceLive)
	c.markReady()

	wctx, wcancel := context.WithCancel(clientv3.WithRequireLeader(c.ctx))
	defer wcancel()
	var chans [6]clientv3.WatchChan
	for i, p := range c.prefixes {
		chans[i] = c.etcd.Watch(wctx, p, clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	}
	c.sessionUp.Store(true)
	for {
		var wr clientv3.WatchResponse
		var ok bool
		select {
		case <-c.ctx.Done():
			return true, nil
		case wr, ok = <-chans[0]:
		case wr, ok = <-chans[1]:
		case wr, ok = <-chans[2]:
		case wr, ok = <-chans[3]:
		case wr, ok = <-chans[4]:
		case wr, ok = <-chans[5]:
		}
		if !ok {
			return true, errors.New("sdk: watch channel closed")
		}
		if wr.CompactRevision != 0 {
			return true, errCompacted
		}
		if err := wr.Err(); err != nil {
			return true, err
		}
		if len(wr.Events) == 0 {
			continue
		}
		ups = ups[:0]
		for _, ev := range wr.Events {
			ups = append(ups, kvUpdate{
				key:    string(ev.Kv.Key),
				value:  ev.Kv.Value,
				modRev: ev.Kv.ModRevision,
				del:    ev.Type == clientv3.EventTypeDelete,
			})
		}
		c.apply(ups, false, 0, SourceLive)
	}
}
