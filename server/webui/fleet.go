package webui

import (
	"context"
	"encoding/json"
	"sort"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/switchyard-io/switchyard/sdk/wire"
)

// fleetSnapshot is what etcd says about published switches and SDK instances:
// enough to tell, per switch, how many instances applied its current value.
type fleetSnapshot struct {
	// Err is set when etcd did not answer; everything else is then empty.
	Err error
	// published maps app/name to the switch key's mod revision and version.
	published map[string]publishedSwitch
	// appRev is the newest switch mod revision per app (own and _global).
	appRev    map[string]int64
	instances map[string][]wire.Instance
}

type publishedSwitch struct {
	ModRevision int64
	Version     int64
}

// Applied is "applied by N/M instances" for one switch.
type Applied struct {
	N, M      int
	Published bool  // etcd holds the switch at Version
	Version   int64 // the version in etcd
	Revision  int64 // the switch key's mod revision
	Known     bool  // false when etcd was unreachable
}

// InstanceRow is one SDK instance on the instances page; it is stale when
// it has not applied the newest switch revision of its app.
type InstanceRow struct {
	wire.Instance
	Stale bool
}

func (h *handler) loadFleet(ctx context.Context) *fleetSnapshot {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	f := &fleetSnapshot{published: map[string]publishedSwitch{}, appRev: map[string]int64{}, instances: map[string][]wire.Instance{}}
	sw, err := h.etcd.Get(ctx, wire.KindPrefix(h.ns, wire.KindSwitches), clientv3.WithPrefix())
	if err != nil {
		f.Err = err
		return f
	}
	for _, kv := range sw.Kvs {
		k, err := wire.ParseKey(h.ns, string(kv.Key))
		if err != nil {
			continue
		}
		var v struct {
			Version int64 `json:"version"`
		}
		_ = json.Unmarshal(kv.Value, &v)
		f.published[k.App+"/"+k.Name] = publishedSwitch{ModRevision: kv.ModRevision, Version: v.Version}
		f.appRev[k.App] = max(f.appRev[k.App], kv.ModRevision)
	}
	in, err := h.etcd.Get(ctx, wire.KindPrefix(h.ns, wire.KindInstances), clientv3.WithPrefix())
	if err != nil {
		f.Err = err
		return f
	}
	for _, kv := range in.Kvs {
		var i wire.Instance
		if json.Unmarshal(kv.Value, &i) != nil {
			continue
		}
		if k, err := wire.ParseKey(h.ns, string(kv.Key)); err == nil {
			i.App = k.App
		}
		f.instances[i.App] = append(f.instances[i.App], i)
	}
	for app := range f.instances {
		sort.Slice(f.instances[app], func(a, b int) bool {
			return f.instances[app][a].InstanceID < f.instances[app][b].InstanceID
		})
	}
	return f
}

// Applied returns the convergence of one switch whose database version is
// version.
func (f *fleetSnapshot) Applied(app, name string, version int64) Applied {
	if f.Err != nil {
		return Applied{}
	}
	p, ok := f.published[app+"/"+name]
	a := Applied{Known: true, Published: ok && p.Version >= version, Version: p.Version, Revision: p.ModRevision}
	insts := f.instances[app]
	if app == wire.GlobalApp {
		insts = nil
		for _, l := range f.instances {
			insts = append(insts, l...)
		}
	}
	a.M = len(insts)
	for _, i := range insts {
		if ok && i.AppliedRevision >= p.ModRevision {
			a.N++
		}
	}
	return a
}

// Instances returns the instances of app with their staleness.
func (f *fleetSnapshot) Instances(app string) []InstanceRow {
	want := max(f.appRev[app], f.appRev[wire.GlobalApp])
	var out []InstanceRow
	for _, i := range f.instances[app] {
		out = append(out, InstanceRow{Instance: i, Stale: i.AppliedRevision < want})
	}
	return out
}

// Apps returns the apps with instances.
func (f *fleetSnapshot) Apps() []string {
	out := make([]string, 0, len(f.instances))
	for a := range f.instances {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}

// Want is the revision an instance of app must have applied.
func (f *fleetSnapshot) Want(app string) int64 { return max(f.appRev[app], f.appRev[wire.GlobalApp]) }

// Rejections is what the fleet says about one limit rule's rejections.
type Rejections struct {
	// Known is false while instances do not report per-rule counts.
	Known bool
	// Rate is rejections per second across the app's instances between
	// their last two reports.
	Rate float64
	// Open counts instances whose breaker for the rule is open.
	Open int
}

// Rejections tells how often the instances of app reject under the rule
// for resource. Instance reports carry only applied_revision and
// stats.fallbacks_served so far, so the answer is always "not known"; this
// is the one place to read per-rule rejection counts and breaker states
// once reports carry them (the Overview then lists rejecting rules first
// and open breakers as such).
func (f *fleetSnapshot) Rejections(app, resource string) Rejections { return Rejections{} }
