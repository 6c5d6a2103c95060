package fleet

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/switchyard-io/switchyard/sdk/wire"
)

// Etcd is the slice of the etcd client the feed needs.
type Etcd interface {
	Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error)
	Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan
}

// listPage bounds one range read of the listing: instance values are up
// to 16 KiB each, and ten thousand of them must not be one response.
const listPage = 500

// Run feeds the model from etcd until ctx ends: it lists instances/,
// switches/ and overrides/ of the namespace at one revision, then watches
// the namespace from the next revision, listing again after a compaction
// or a broken watch (with a jittered, capped backoff). It also samples the
// history and sends change notices.
func (m *Model) Run(ctx context.Context, cli Etcd) {
	m.reachable.Store(true)
	ticking := make(chan struct{})
	go func() { defer close(ticking); m.tick(ctx, cli) }()
	defer func() { <-ticking }()
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		rev, err := m.list(ctx, cli)
		if err == nil {
			m.watching.Store(true)
			backoff = 100 * time.Millisecond
			err = m.watch(ctx, cli, rev)
		}
		m.watching.Store(false)
		if ctx.Err() != nil {
			return
		}
		m.cfg.Logger.Warn("fleet: etcd feed interrupted, listing again", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff/2 + rand.N(backoff/2+1)):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// list reads the three prefixes at one revision into fresh state, keeping
// the history of switches and rules.
func (m *Model) list(ctx context.Context, cli Etcd) (int64, error) {
	type kv struct {
		kind, app, name string
		value           []byte
		modRev          int64
	}
	var (
		all []kv
		rev int64
	)
	for _, kind := range []string{wire.KindSwitches, wire.KindOverrides, wire.KindInstances} {
		prefix := wire.KindPrefix(m.cfg.Namespace, kind)
		end := clientv3.GetPrefixRangeEnd(prefix)
		for key := prefix; ; {
			opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(listPage)}
			if rev > 0 {
				opts = append(opts, clientv3.WithRev(rev))
			}
			lctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			resp, err := cli.Get(lctx, key, opts...)
			cancel()
			if err != nil {
				return 0, err
			}
			if rev == 0 {
				rev = resp.Header.Revision
			}
			for _, x := range resp.Kvs {
				if pk, err := wire.ParseKey(m.cfg.Namespace, string(x.Key)); err == nil && pk.Kind == kind {
					all = append(all, kv{kind, pk.App, pk.Name, x.Value, x.ModRevision})
				}
			}
			if !resp.More || len(resp.Kvs) == 0 {
				break
			}
			key = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
		}
	}
	defer m.timeApply(time.Now())
	m.mu.Lock()
	defer m.mu.Unlock()
	old := m.apps
	m.apps = map[string]*appState{}
	for name, a := range old {
		// Keep interned names and history; instances and values are
		// listed anew.
		n := m.app(name)
		n.index, n.names, n.swHist, n.limHist = a.index, a.names, a.swHist, a.limHist
	}
	for _, x := range all {
		if x.kind == wire.KindInstances {
			m.putInstance(x.app, x.name, x.value, x.modRev)
		} else {
			m.putSwitch(x.kind, x.app, x.name, x.value, x.modRev)
		}
	}
	m.rev = rev
	m.dirty.Store(true)
	return rev, nil
}

// watch applies the namespace's events from rev+1 until the watch breaks.
func (m *Model) watch(ctx context.Context, cli Etcd, rev int64) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for wr := range cli.Watch(wctx, wire.NamespacePrefix(m.cfg.Namespace), clientv3.WithPrefix(), clientv3.WithRev(rev+1)) {
		if err := wr.Err(); err != nil {
			return err // compacted or broken: list again
		}
		m.apply(wr.Events, wr.Header.Revision)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return errors.New("fleet: watch closed")
}

// apply folds a batch of watch events into the model.
func (m *Model) apply(events []*clientv3.Event, rev int64) {
	defer m.timeApply(time.Now())
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, ev := range events {
		pk, err := wire.ParseKey(m.cfg.Namespace, string(ev.Kv.Key))
		if err != nil {
			continue
		}
		del := ev.Type == mvccpb.DELETE
		switch pk.Kind {
		case wire.KindInstances:
			if del {
				m.deleteInstance(pk.App, pk.Name)
			} else {
				m.putInstance(pk.App, pk.Name, ev.Kv.Value, ev.Kv.ModRevision)
			}
		case wire.KindSwitches, wire.KindOverrides:
			if del {
				m.deleteSwitch(pk.Kind, pk.App, pk.Name)
			} else {
				m.putSwitch(pk.Kind, pk.App, pk.Name, ev.Kv.Value, ev.Kv.ModRevision)
			}
		default:
			continue
		}
		m.dirty.Store(true)
	}
	m.rev = max(m.rev, rev)
}

func (m *Model) timeApply(start time.Time) { m.applyNanos.Add(int64(time.Since(start))) }

// noticeEvery bounds how often subscribers hear that the fleet changed:
// ten thousand acks after a flip are one notice a second, not ten
// thousand page refreshes.
const noticeEvery = time.Second

// probeEvery is how often the feed checks that etcd answers: a watch
// waits out an outage silently, and the model must say it is out of date.
const probeEvery = 2 * time.Second

// tick sends change notices, samples the history and probes etcd until
// ctx ends.
func (m *Model) tick(ctx context.Context, cli Etcd) {
	notice := time.NewTicker(noticeEvery)
	defer notice.Stop()
	sample := time.NewTicker(m.cfg.HistoryStep)
	defer sample.Stop()
	probe := time.NewTicker(probeEvery)
	defer probe.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-notice.C:
			if m.dirty.Swap(false) {
				m.notify()
			}
		case <-sample.C:
			m.Sample(m.cfg.Now())
		case <-probe.C:
			pctx, cancel := context.WithTimeout(ctx, probeEvery)
			_, err := cli.Get(clientv3.WithRequireLeader(pctx), wire.ElectionKey(m.cfg.Namespace), clientv3.WithCountOnly())
			cancel()
			m.reachable.Store(err == nil)
		}
	}
}

// Subscribe returns a channel that receives a notice, at most once a
// second, when the fleet changed; call cancel when done.
func (m *Model) Subscribe() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	m.subMu.Lock()
	m.subs[ch] = struct{}{}
	m.subMu.Unlock()
	return ch, func() {
		m.subMu.Lock()
		delete(m.subs, ch)
		m.subMu.Unlock()
	}
}

func (m *Model) notify() {
	m.subMu.Lock()
	defer m.subMu.Unlock()
	for ch := range m.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}
