package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
	"gorm.io/gorm"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/sdk/wire"
)

// Repair is one key the reconciler changed.
type Repair struct {
	Key    string
	Before []byte // what etcd held; nil when the key was missing
	After  []byte // the database's value; nil when the key must not exist
}

// Action is "put" or "delete".
func (r Repair) Action() string {
	if r.After == nil {
		return "delete"
	}
	return "put"
}

// repairBatch bounds the operations of one etcd transaction (etcd's default
// limit is 128).
const repairBatch = 100

// Reconcile makes etcd equal to the database under the fence: it drains the
// outbox, then republishes every switch or rule key that is missing or
// differs, and deletes keys below switches/ and limits/ that the database
// does not know. Every such key is drift: it is repaired and audited with
// action "drift". Keys with a pending outbox row are left to the publisher.
// Repairs go to etcd in fenced transactions of up to 100 keys, each batch
// audited in one database transaction, so even a wiped etcd is rebuilt in
// few round trips. Entities the drain could not publish stay pending; their
// errors are returned after the pass.
//
// The reads run without the lock the drains take, so a person's change is
// published during a reconciliation rather than after it. Only when they
// find drift does the reconciler take that lock, and it reads again under
// it if a drain ran meanwhile (a drain between the two reads would look
// like drift).
func (p *Publisher) Reconcile(ctx context.Context, f Fence) ([]Repair, error) {
	p.reconcileMu.Lock()
	defer p.reconcileMu.Unlock()
	var ee *entityError
	drainErr := p.Drain(ctx, f)
	if drainErr != nil && !errors.As(drainErr, &ee) {
		return nil, drainErr
	}
	seen := p.drains.Load()
	todo, err := p.drift(ctx)
	if err != nil {
		return nil, err
	}
	if len(todo) == 0 {
		p.metrics.Reconciles.Inc()
		return nil, drainErr
	}
	p.runMu.Lock()
	defer p.runMu.Unlock()
	if seen%2 == 1 || p.drains.Load() != seen {
		if todo, err = p.drift(ctx); err != nil {
			return nil, err
		}
	}
	var done []Repair
	for len(todo) > 0 {
		batch := todo[:min(len(todo), repairBatch)]
		todo = todo[len(batch):]
		ops := make([]clientv3.Op, len(batch))
		for i, r := range batch {
			ops[i] = clientv3.OpDelete(r.Key)
			if r.After != nil {
				ops[i] = clientv3.OpPut(r.Key, string(r.After))
			}
		}
		if _, err := p.txn(ctx, f, ops...); err != nil {
			return done, err
		}
		done = append(done, batch...)
		p.recordDrift(ctx, batch)
	}
	p.metrics.Reconciles.Inc()
	return done, drainErr
}

// drift compares etcd with the database and returns the repairs that make
// etcd equal to it, sorted by key: every switch or rule key that is
// missing or differs, and every key below switches/ and limits/ the
// database does not know. Keys with a pending outbox row are left to the
// publisher.
func (p *Publisher) drift(ctx context.Context) ([]Repair, error) {
	actual := map[string][]byte{}
	for _, kind := range []string{wire.KindSwitches, wire.KindLimits} {
		resp, err := p.kv.Get(ctx, wire.KindPrefix(p.ns, kind), clientv3.WithPrefix())
		if err != nil {
			return nil, fmt.Errorf("server: reconcile: list etcd: %w", err)
		}
		for _, kv := range resp.Kvs {
			actual[string(kv.Key)] = kv.Value
		}
	}
	// Read the database after etcd: a change committed in between has an
	// outbox row and is skipped here, never mistaken for drift.
	want, pending, err := p.desiredAll(ctx)
	if err != nil {
		return nil, err
	}
	var todo []Repair
	for key, val := range want {
		if have, ok := actual[key]; !pending[key] && (!ok || string(have) != string(val)) {
			todo = append(todo, Repair{Key: key, Before: have, After: val})
		}
	}
	for key, have := range actual {
		if _, ok := want[key]; !ok && !pending[key] {
			todo = append(todo, Repair{Key: key, Before: have})
		}
	}
	slices.SortFunc(todo, func(a, b Repair) int { return strings.Compare(a.Key, b.Key) })
	return todo, nil
}

// desiredAll reads, in one transaction, the value every key should hold and
// the keys that still have unpublished changes.
func (p *Publisher) desiredAll(ctx context.Context) (want map[string][]byte, pending map[string]bool, err error) {
	want, pending = map[string][]byte{}, map[string]bool{}
	err = p.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var switches []Switch
		if err := tx.Find(&switches).Error; err != nil {
			return err
		}
		for i := range switches {
			p.want(want, pending, wire.SwitchKey(p.ns, switches[i].App, switches[i].Name), switches[i].Wire())
		}
		var rules []LimitRule
		if err := tx.Where("state = ?", wire.StateOn).Find(&rules).Error; err != nil {
			return err
		}
		for i := range rules {
			p.want(want, pending, wire.LimitKey(p.ns, rules[i].App, rules[i].Resource), rules[i].Wire())
		}
		var rows []outboxRow
		if err := tx.Find(&rows).Error; err != nil {
			return err
		}
		for _, r := range rows {
			pending[p.key(entityKey{r.Kind, r.App, r.Name})] = true
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("server: reconcile: read database: %w", err)
	}
	return want, pending, nil
}

// want records the value key must hold. A value that does not encode is
// left alone like a pending change (the publisher reports it), rather than
// mistaken for a key that must not exist.
func (p *Publisher) want(want map[string][]byte, pending map[string]bool, key string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		p.log.Error("reconciler: cannot encode", "key", key, "err", err)
		pending[key] = true
		return
	}
	want[key] = b
}

// recordDrift counts a batch of repairs and appends their audit events in
// one transaction.
func (p *Publisher) recordDrift(ctx context.Context, batch []Repair) {
	events := make([]*audit.Event, len(batch))
	for i, r := range batch {
		p.metrics.ReconcileRepairs.WithLabelValues(r.Action()).Inc()
		p.log.Warn("reconciler: repaired drift", "key", r.Key, "action", r.Action())
		target := "etcd:" + r.Key
		if pk, err := wire.ParseKey(p.ns, r.Key); err == nil {
			target = "switch/" + pk.App + "/" + pk.Name
			if pk.Kind == wire.KindLimits {
				target = "limit/" + pk.App + "/" + pk.Name
			}
		}
		reason := "etcd differed from the database; reverted to the database state"
		if r.Before == nil {
			reason = "key was missing in etcd; republished from the database"
		} else if r.After == nil {
			reason = "key is unknown to the database; deleted"
		}
		events[i] = SystemActor("reconciler").event("drift", target, reason)
		events[i].Before, events[i].After = string(r.Before), string(r.After)
	}
	err := p.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		for _, ev := range events {
			if err := audit.Append(tx, ev); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		p.log.Error("reconciler: audit drift", "keys", len(batch), "err", err)
	}
}
