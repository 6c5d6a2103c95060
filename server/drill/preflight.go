package drill

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/sdk/wire"
	"github.com/switchyard-io/switchyard/server"
)

// preflight checks, before a run degrades anything, that now is a fair
// time to drill: no blackout window, the switch exists and is off, no
// switch of the app is on by a person, no auto-trigger acted on the app
// within the trigger window, no other drill runs on the app, the slice has
// live instances, and no abort condition holds already. It returns every
// check and the switch.
func (j *Job) preflight(ctx context.Context, r *Run, pl *plan) ([]Check, *server.Switch) {
	now := j.s.cfg.Service.Now()
	var out []Check
	add := func(name string, ok bool, format string, a ...any) {
		out = append(out, Check{Name: name, OK: ok, Detail: fmt.Sprintf(format, a...)})
	}
	if w := pl.blackoutAt(now); w != "" {
		add("blackout", false, "inside the blackout window %s", w)
	} else {
		add("blackout", true, "outside every blackout window")
	}
	svc := j.s.cfg.Service
	sw, err := svc.GetSwitch(ctx, r.App, r.SwitchName)
	switch {
	case errors.Is(err, server.ErrNotFound):
		add("switch", false, "there is no switch %s/%s", r.App, r.SwitchName)
	case err != nil:
		add("switch", false, "cannot read the switch: %v", err)
	case sw.State == wire.StateOn:
		add("switch", false, "%s/%s is on (by %s); a drill would replace its rollout", r.App, r.SwitchName, sw.UpdatedBy)
	default:
		add("switch", true, "%s/%s exists and is off", r.App, r.SwitchName)
	}
	if held := j.personSwitches(ctx, r.App); held != "" {
		add("person_switches", false, "%s", held)
	} else {
		add("person_switches", true, "no switch of %s is on by a person", r.App)
	}
	if pl.triggerWindow > 0 {
		if fired := j.recentTriggers(ctx, r.App, pl); fired != "" {
			add("recent_trigger", false, "%s", fired)
		} else {
			add("recent_trigger", true, "no auto-trigger acted on %s in the last %s", r.App, server.ShortDuration(pl.triggerWindow))
		}
	}
	var others []Run
	if err := j.s.db.WithContext(ctx).Where("app = ? AND id <> ? AND finished_at IS NULL AND phase IN ?", r.App, r.ID,
		[]string{PhaseApplying, PhaseActive, PhaseRecovering}).Find(&others).Error; err != nil {
		add("other_drills", false, "cannot read the runs: %v", err)
	} else if len(others) > 0 {
		add("other_drills", false, "drill %s (run #%d) is running on %s", others[0].Drill, others[0].Number, r.App)
	} else {
		add("other_drills", true, "no other drill runs on %s", r.App)
	}
	targeted := 0
	for _, s := range j.fleet(r, pl) {
		if s.Targeted {
			targeted++
		}
	}
	switch {
	case !j.s.cfg.Fleet.Synced():
		add("instances", false, "the console's fleet model is not in sync with etcd")
	case targeted == 0:
		add("instances", false, "no live instance of %s is in the slice (%s)", r.App, describeTarget(pl.rollout))
	case targeted == 1:
		add("instances", true, "1 live instance in the slice")
	default:
		add("instances", true, "%d live instances in the slice", targeted)
	}
	if len(pl.conditions) > 0 {
		var p Progress
		if why := j.conditions(ctx, r.App, pl, &p, now); why != "" {
			add("abort_conditions", false, "%s", why)
		} else {
			add("abort_conditions", true, "no abort condition holds")
		}
	}
	return out, sw
}

// personSwitches names the switches of app that are on by a person: whose
// newest audited switch change was a person's ("" none).
func (j *Job) personSwitches(ctx context.Context, app string) string {
	svc := j.s.cfg.Service
	list, err := svc.ListSwitches(ctx, app)
	if err != nil {
		return "cannot read the switches: " + err.Error()
	}
	var held []string
	for i := range list {
		sw := &list[i]
		if sw.State != wire.StateOn {
			continue
		}
		events, _, err := svc.ListAudit(ctx, audit.Filter{Target: sw.Target(), Limit: 50})
		if err != nil {
			return "cannot read the audit log: " + err.Error()
		}
		for _, ev := range events {
			if ev.Action.Entity() != "switch" {
				continue
			}
			if audit.IsPerson(ev.ActorKind) {
				held = append(held, fmt.Sprintf("%s is on by %s %s", sw.Target(), ev.ActorKind, ev.Actor))
			}
			break
		}
	}
	return strings.Join(held, ", ")
}

// recentTriggers names what an auto-trigger did to app's switches within
// the trigger window ("" nothing).
func (j *Job) recentTriggers(ctx context.Context, app string, pl *plan) string {
	svc := j.s.cfg.Service
	events, _, err := svc.ListAudit(ctx, audit.Filter{
		Since: svc.Now().Add(-pl.triggerWindow), ActorKind: audit.ActorTrigger, TargetPrefix: "switch/" + app + "/", Limit: 1,
	})
	if err != nil {
		return "cannot read the audit log: " + err.Error()
	}
	for _, ev := range events {
		return fmt.Sprintf("auto-trigger %s acted on %s at %s (%s)", ev.Cause, ev.Target, stamp(ev.At), ev.Action)
	}
	return ""
}
