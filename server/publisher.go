package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"gorm.io/gorm"

	"github.com/switchyard-io/switchyard/sdk/wire"
)

// KV is the slice of the etcd client the publisher and reconciler need.
type KV interface {
	Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error)
	Txn(ctx context.Context) clientv3.Txn
}

// errNotLeader is ErrNotLeader (term.go), as the publisher's fenced etcd
// transactions find it.
var errNotLeader = ErrNotLeader

// Fence guards every write of a leader: its transactions succeed only while
// the leader's election key still exists with the same create revision.
type Fence struct{ cmp clientv3.Cmp }

// NewFence returns the fence for an election key created at rev.
func NewFence(key string, rev int64) Fence {
	return Fence{cmp: clientv3.Compare(clientv3.CreateRevision(key), "=", rev)}
}

// Cmp is the fence as an etcd comparison, for the If of a leader job's own
// transactions (a drill's override); a failed If means ErrNotLeader.
func (f Fence) Cmp() clientv3.Cmp { return f.cmp }

// Publisher turns outbox rows into etcd transactions. Only the console that
// holds the election drains the outbox (Lead); any console can Await the
// publication of its own changes.
type Publisher struct {
	db      *gorm.DB
	kv      KV
	ns      string
	log     *slog.Logger
	metrics *Metrics
	wait    time.Duration

	kick    chan struct{}
	mu      sync.Mutex
	waiters map[int64]waiter
	// published remembers, per entity, the newest outbox row this console
	// published and at which revision, so a change whose row was drained
	// before its caller began to wait still gets its receipt.
	published map[entityKey]publication
	leading   bool

	// runMu serializes drains and the reconciler's repairs (each a leader
	// job of its own): a drain between the reconciler's etcd read and its
	// database read would look like drift. drains counts the drains begun
	// and ended (odd while one runs), so the reconciler reads without the
	// lock — a person's change waits for a drain, never for a full
	// reconciliation — and reads again under it only when a drain came
	// between (see Reconcile). reconcileMu serializes reconciliations.
	runMu       sync.Mutex
	drains      atomic.Uint64
	reconcileMu sync.Mutex
	// retry paces entities whose publish failed (under runMu).
	retry map[entityKey]entityRetry
	now   func() time.Time
}

// entityRetry is the pause before an entity whose publish failed is tried
// again: entityRetryMin, doubling up to entityRetryMax, so a change etcd
// keeps refusing costs a log line a minute rather than four a second. A
// newer change of the entity is tried at once.
type entityRetry struct {
	upTo int64 // newest outbox row of the failed attempt
	at   time.Time
	wait time.Duration
}

const (
	entityRetryMin = time.Second
	entityRetryMax = time.Minute
)

type publication struct{ upTo, rev int64 }

type waiter struct {
	entity entityKey
	ch     chan Receipt
}

type entityKey struct{ kind, app, name string }

// PublisherConfig configures a Publisher.
type PublisherConfig struct {
	Namespace string
	// Wait bounds how long a change waits for its publication before it
	// answers published:false (default 1s).
	Wait    time.Duration
	Logger  *slog.Logger
	Metrics *Metrics
}

// NewPublisher returns a publisher writing to kv.
func NewPublisher(db *gorm.DB, kv KV, c PublisherConfig) *Publisher {
	if c.Wait == 0 {
		c.Wait = time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Metrics == nil {
		c.Metrics = NewMetrics(nil)
	}
	return &Publisher{
		db: db, kv: kv, ns: c.Namespace, log: c.Logger, metrics: c.Metrics, wait: c.Wait,
		kick: make(chan struct{}, 1), waiters: map[int64]waiter{}, published: map[entityKey]publication{},
		retry: map[entityKey]entityRetry{}, now: time.Now,
	}
}

// Kick asks the leader loop to drain the outbox now.
func (p *Publisher) Kick() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// Await waits until the change behind outbox row ob is in etcd, or the wait
// bound passes. A console that is not the leader watches the outbox row
// disappear instead and reads the key's revision.
func (p *Publisher) Await(ctx context.Context, ob *outboxRow) Receipt {
	w := waiter{entity: entityKey{ob.Kind, ob.App, ob.Name}, ch: make(chan Receipt, 1)}
	p.mu.Lock()
	if pub, ok := p.published[w.entity]; ok && pub.upTo >= ob.ID {
		p.mu.Unlock()
		return Receipt{Published: true, Revision: pub.rev}
	}
	p.waiters[ob.ID] = w
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.waiters, ob.ID)
		p.mu.Unlock()
	}()
	p.Kick()
	ctx, cancel := context.WithTimeout(ctx, p.wait)
	defer cancel()
	poll := time.NewTicker(20 * time.Millisecond)
	defer poll.Stop()
	for {
		select {
		case rc := <-w.ch:
			return rc
		case <-ctx.Done():
			return Receipt{}
		case <-poll.C:
			if p.isLeading() {
				continue
			}
			var n int64
			if err := p.db.WithContext(ctx).Model(&outboxRow{}).Where("id = ?", ob.ID).Count(&n).Error; err != nil || n > 0 {
				continue
			}
			// The leader published it; the key's mod revision is the
			// revision of this change (or a newer one of the same entity).
			resp, err := p.kv.Get(ctx, p.key(w.entity), clientv3.WithKeysOnly())
			switch {
			case err != nil:
				return Receipt{Published: true}
			case len(resp.Kvs) > 0:
				return Receipt{Published: true, Revision: resp.Kvs[0].ModRevision}
			default:
				return Receipt{Published: true, Revision: resp.Header.Revision}
			}
		}
	}
}

func (p *Publisher) isLeading() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.leading
}

// SetLeading tells the publisher whether this console leads: a leader's
// Await waits for its own drain, a follower's watches the outbox.
func (p *Publisher) SetLeading(v bool) {
	p.mu.Lock()
	p.leading = v
	p.mu.Unlock()
	if v {
		p.metrics.Leader.Set(1)
	} else {
		p.metrics.Leader.Set(0)
	}
}

func (p *Publisher) key(e entityKey) string {
	if e.kind == outboxLimit {
		return wire.LimitKey(p.ns, e.app, e.name)
	}
	return wire.SwitchKey(p.ns, e.app, e.name)
}

// drainBatch bounds the outbox rows one drain reads at a time.
const drainBatch = 200

// Drain publishes every pending outbox row under the fence, oldest first.
// A failure that concerns one entity only (see entityError) leaves that
// entity's rows in the outbox and does not hold back the other entities;
// the drain then returns the joined entity errors, and the entity is tried
// again after a growing pause (see entityRetry). Any other failure (lost
// leadership, etcd or the database unreachable) stops the drain.
func (p *Publisher) Drain(ctx context.Context, f Fence) error {
	p.runMu.Lock()
	defer p.runMu.Unlock()
	p.drains.Add(1)
	defer p.drains.Add(1)
	return p.drain(ctx, f)
}

func (p *Publisher) drain(ctx context.Context, f Fence) error {
	var (
		after  int64
		failed []error
		// blocked entities failed in this drain: their newer rows wait too,
		// so an entity is never published out of order.
		blocked = map[entityKey]bool{}
	)
	for {
		var rows []outboxRow
		if err := p.db.WithContext(ctx).Where("id > ?", after).Order("id").Limit(drainBatch).Find(&rows).Error; err != nil {
			return fmt.Errorf("server: read outbox: %w", err)
		}
		if len(rows) == 0 {
			break
		}
		after = rows[len(rows)-1].ID
		// Publish each entity once, with its newest row.
		newest := map[entityKey]outboxRow{}
		var order []entityKey
		for _, r := range rows {
			k := entityKey{r.Kind, r.App, r.Name}
			if _, seen := newest[k]; !seen {
				order = append(order, k)
			}
			newest[k] = r
		}
		for _, k := range order {
			r := newest[k]
			if rt, ok := p.retry[k]; ok && r.ID <= rt.upTo && p.now().Before(rt.at) {
				blocked[k] = true // pausing after a failure
			}
			if blocked[k] {
				continue
			}
			rev, err := p.publish(ctx, f, k)
			if err != nil {
				p.metrics.PublishErrors.Inc()
				var ee *entityError
				if !errors.As(err, &ee) || ctx.Err() != nil {
					return err
				}
				blocked[k] = true
				p.backOff(k, r.ID)
				failed = append(failed, err)
				continue
			}
			delete(p.retry, k)
			if err := p.db.WithContext(ctx).Where("kind = ? AND app = ? AND name = ? AND id <= ?", k.kind, k.app, k.name, r.ID).
				Delete(&outboxRow{}).Error; err != nil {
				return fmt.Errorf("server: clear outbox: %w", err)
			}
			p.metrics.Published.Inc()
			p.metrics.PublishLag.Observe(time.Since(r.CreatedAt).Seconds())
			p.resolve(k, r.ID, rev)
		}
		if len(rows) < drainBatch {
			break
		}
	}
	var depth int64
	if p.db.WithContext(ctx).Model(&outboxRow{}).Count(&depth).Error == nil {
		p.metrics.OutboxDepth.Set(float64(depth))
	}
	return errors.Join(failed...)
}

// backOff schedules the next attempt of an entity whose publish failed.
func (p *Publisher) backOff(k entityKey, upTo int64) {
	rt := p.retry[k]
	rt.wait = min(max(2*rt.wait, entityRetryMin), entityRetryMax)
	rt.upTo, rt.at = upTo, p.now().Add(rt.wait)
	p.retry[k] = rt
}

// entityError is a publish failure of one entity that says nothing about
// the others: an outbox kind this console does not know (written by a newer
// version), a value that cannot be encoded, a request etcd refuses as
// invalid (such as one over its size limit).
type entityError struct {
	key entityKey
	err error
}

func (e *entityError) Error() string {
	return fmt.Sprintf("server: publish %s %s/%s: %v", e.key.kind, e.key.app, e.key.name, e.err)
}

func (e *entityError) Unwrap() error { return e.err }

func (p *Publisher) resolve(k entityKey, upTo, rev int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.published[k] = publication{upTo: upTo, rev: rev}
	for id, w := range p.waiters {
		if id <= upTo && w.entity == k {
			select {
			case w.ch <- Receipt{Published: true, Revision: rev}:
			default:
			}
		}
	}
}

// desired returns the value etcd must hold for an entity, or nil when its
// key must not exist.
func (p *Publisher) desired(ctx context.Context, k entityKey) ([]byte, error) {
	db := p.db.WithContext(ctx)
	switch k.kind {
	case outboxSwitch:
		sw, err := load[Switch](db, k.app, k.name)
		if errors.Is(err, ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return encode(k, sw.Wire())
	case outboxLimit:
		r, err := load[LimitRule](db, k.app, k.name)
		if errors.Is(err, ErrNotFound) || (err == nil && r.State != "on") {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return encode(k, r.Wire())
	}
	return nil, &entityError{k, fmt.Errorf("unknown outbox kind %q", k.kind)}
}

// encode is the JSON of an entity's published value.
func encode(k entityKey, v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, &entityError{k, err}
	}
	return b, nil
}

// publish writes one entity's current state in one fenced transaction and
// returns the etcd revision.
func (p *Publisher) publish(ctx context.Context, f Fence, k entityKey) (int64, error) {
	val, err := p.desired(ctx, k)
	if err != nil {
		return 0, err
	}
	key := p.key(k)
	op := clientv3.OpDelete(key)
	if val != nil {
		op = clientv3.OpPut(key, string(val))
	}
	rev, err := p.txn(ctx, f, op)
	var coded interface{ Code() codes.Code }
	if errors.As(err, &coded) && coded.Code() == codes.InvalidArgument {
		err = &entityError{k, err}
	}
	return rev, err
}

// txn commits ops if the fence holds.
func (p *Publisher) txn(ctx context.Context, f Fence, ops ...clientv3.Op) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	resp, err := p.kv.Txn(ctx).If(f.cmp).Then(ops...).Commit()
	if err != nil {
		return 0, fmt.Errorf("server: etcd txn: %w", err)
	}
	if !resp.Succeeded {
		return 0, errNotLeader
	}
	return resp.Header.Revision, nil
}
