package sdk

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/connectivity"
)

// Reconnect backoff bounds; each wait is jittered to [d/2, d).
const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 10 * time.Second
)

var errCompacted = errors.New("sdk: watch revision compacted")

// watchConn follows the state of the gRPC connection to etcd until Close.
// When etcd stops or the connection is cut, the connection leaves Ready
// within milliseconds, while the watch itself stays open (clientv3 resumes
// it transparently after a reconnect) and a lease keepalive only goes
// unanswered after seconds; so this is what makes Stale prompt.
func (c *Client) watchConn() {
	defer c.wg.Done()
	conn := c.etcd.ActiveConnection()
	for {
		s := conn.GetState()
		up := s == connectivity.Ready
		if c.connUp.Swap(up) != up && c.Ready() {
			if up {
				c.log.Info("etcd connection ready again")
			} else {
				c.log.Warn("etcd connection lost, serving last known state", "state", s.String())
			}
		}
		if !conn.WaitForStateChange(c.ctx, s) {
			return
		}
	}
}

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

// progressRetry is how often the watch asks again for a progress
// notification that did not come (etcd answers one only while every
// watcher on the stream is in sync, and drops it when the stream is busy).
const progressRetry = time.Second

// progressDelay is the least wait before a progress request (see session).
const progressDelay = debounceMin / 2

// session lists every watched prefix in one transaction (one revision R),
// applies the listing, then watches from R+1 until something breaks.
// listed reports whether the listing succeeded.
//
// The six prefixes are six watches, and the order in which their
// channels are drained is arbitrary: an event at R+2 on one may be applied
// before an event at R+1 on another. So the applied revision (Revision,
// the instance registry's ack) is the lowest revision through which every
// watch has delivered: its last event, or a progress notification, which
// etcd sends on the shared stream after every event up to its revision.
// When an event leaves the watches apart, the session asks for one.
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

	// All watches share wctx, hence one gRPC stream, which is what a
	// progress request (RequestProgress(wctx)) answers on.
	wctx, wcancel := context.WithCancel(clientv3.WithRequireLeader(c.ctx))
	defer wcancel()
	var chans [len(c.prefixes)]clientv3.WatchChan
	var through [len(c.prefixes)]int64 // every event up to it was delivered, by watch
	for i, p := range c.prefixes {
		chans[i] = c.etcd.Watch(wctx, p, clientv3.WithPrefix(), clientv3.WithRev(rev+1))
		through[i] = rev
	}
	progress := time.NewTimer(0)
	progress.Stop()
	defer progress.Stop()
	asking := false
	c.sessionUp.Store(true)
	for {
		var wr clientv3.WatchResponse
		var ok bool
		var i int
		select {
		case <-c.ctx.Done():
			return true, nil
		case wr, ok = <-chans[0]:
		case wr, ok = <-chans[1]:
			i = 1
		case wr, ok = <-chans[2]:
			i = 2
		case wr, ok = <-chans[3]:
			i = 3
		case wr, ok = <-chans[4]:
			i = 4
		case wr, ok = <-chans[5]:
			i = 5
		case <-progress.C:
			if err := c.etcd.RequestProgress(wctx); err != nil && c.ctx.Err() == nil {
				c.log.Debug("watch progress request failed", "err", err)
			}
			progress.Reset(progressRetry)
			continue
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
		if n := len(wr.Events); n > 0 {
			through[i] = max(through[i], wr.Events[n-1].Kv.ModRevision)
		} else if wr.IsProgressNotify() {
			through[i] = max(through[i], wr.Header.Revision)
		}
		applied := slices.Min(through[:])
		if len(wr.Events) == 0 {
			c.confirm(applied)
		} else {
			ups = ups[:0]
			for _, ev := range wr.Events {
				ups = append(ups, kvUpdate{
					key:    string(ev.Kv.Key),
					value:  ev.Kv.Value,
					modRev: ev.Kv.ModRevision,
					del:    ev.Type == clientv3.EventTypeDelete,
				})
			}
			c.apply(ups, false, applied, SourceLive)
		}
		// While some watch has delivered more than another, ask for
		// progress: after the change's own fan-out (a flip reaching
		// thousands of instances takes tens of milliseconds, and a thousand
		// progress requests inside it would slow its tail) and before the
		// registry's ack (debounceMin), jittered so they do not arrive as
		// one burst.
		switch behind := slices.Max(through[:]) > applied; {
		case behind && !asking:
			progress.Reset(progressDelay + rand.N(debounceMin-progressDelay))
			asking = true
		case !behind && asking:
			progress.Stop()
			asking = false
		}
	}
}
