package server

import (
	"context"
	"encoding/json"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
	"gorm.io/gorm"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/sdk/wire"
)

// Repair is one key the reconciler changed.
type Repair struct {
	Key    string
	Action string // "put" or "delete"
	Drift  bool   // etcd held something the database did not (audited)
}

// Reconcile makes etcd equal to the database under the fence: it drains the
// outbox, then republishes every switch or rule key that is missing or
// differs, and deletes keys below switches/ and limits/ that the database
// does not know. A key that held a different value or should not exist is
// drift: it is reverted and audited with action "drift". Keys with a pending
// outbox row are left to the publisher.
func (p *Publisher) Reconcile(ctx context.Context, f Fence) ([]Repair, error) {
	if err := p.Drain(ctx, f); err != nil {
		return nil, err
	}
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
	var repairs []Repair
	for key, val := range want {
		have, ok := actual[key]
		if pending[key] || (ok && string(have) == string(val)) {
			continue
		}
		if _, err := p.txn(ctx, f, clientv3.OpPut(key, string(val))); err != nil {
			return repairs, err
		}
		r := Repair{Key: key, Action: "put", Drift: true}
		repairs = append(repairs, r)
		p.recordDrift(ctx, r, have, val)
	}
	for key, have := range actual {
		if _, ok := want[key]; ok || pending[key] {
			continue
		}
		if _, err := p.txn(ctx, f, clientv3.OpDelete(key)); err != nil {
			return repairs, err
		}
		r := Repair{Key: key, Action: "delete", Drift: true}
		repairs = append(repairs, r)
		p.recordDrift(ctx, r, have, nil)
	}
	p.metrics.Reconciles.Inc()
	return repairs, nil
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
			b, _ := json.Marshal(switches[i].Wire())
			want[wire.SwitchKey(p.ns, switches[i].App, switches[i].Name)] = b
		}
		var rules []LimitRule
		if err := tx.Where("state = ?", wire.StateOn).Find(&rules).Error; err != nil {
			return err
		}
		for i := range rules {
			b, _ := json.Marshal(rules[i].Wire())
			want[wire.LimitKey(p.ns, rules[i].App, rules[i].Resource)] = b
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

// recordDrift counts a repair and appends its audit event.
func (p *Publisher) recordDrift(ctx context.Context, r Repair, before, after []byte) {
	p.metrics.ReconcileRepairs.WithLabelValues(r.Action).Inc()
	target := "etcd:" + r.Key
	if pk, err := wire.ParseKey(p.ns, r.Key); err == nil {
		target = "switch/" + pk.App + "/" + pk.Name
		if pk.Kind == wire.KindLimits {
			target = "limit/" + pk.App + "/" + pk.Name
		}
	}
	reason := "etcd differed from the database; reverted to the database state"
	if before == nil {
		reason = "key was missing in etcd; republished from the database"
	} else if after == nil {
		reason = "key is unknown to the database; deleted"
	}
	ev := SystemActor("reconciler").event("drift", target, reason)
	ev.Before, ev.After = string(before), string(after)
	err := p.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error { return audit.Append(tx, ev) })
	if err != nil {
		p.log.Error("reconciler: audit drift", "key", r.Key, "err", err)
	}
	p.log.Warn("reconciler: repaired drift", "key", r.Key, "action", r.Action)
}
