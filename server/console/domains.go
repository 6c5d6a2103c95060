package console

import (
	"context"
	"encoding/json"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/api"
	"github.com/switchyard-io/switchyard/server/approval"
	"github.com/switchyard-io/switchyard/server/drill"
	"github.com/switchyard-io/switchyard/server/expiry"
	"github.com/switchyard-io/switchyard/server/finding"
	"github.com/switchyard-io/switchyard/server/notify"
	"github.com/switchyard-io/switchyard/server/retention"
	"github.com/switchyard-io/switchyard/server/rollout"
	"github.com/switchyard-io/switchyard/server/trigger"
	"github.com/switchyard-io/switchyard/server/webui"
)

// wireDomains builds the job domains — staged rollouts, auto-triggers,
// drills, expiry and findings, notification channels — on the console's
// service, fleet model and metric sources, registers their leader jobs on
// the scheduler and their person-change hooks on the service, and returns
// what the API and the web UI need of them, and registers the state
// metrics (open findings, failing deliveries) on reg. Each domain is one
// block here.
func (c *Console) wireDomains(reg prometheus.Registerer) (api.Domains, webui.Domains, error) {
	var (
		ad api.Domains
		wd webui.Domains
	)

	// Staged rollouts: the leader advances the plans; a person's change
	// to a switch pauses its plan.
	rollouts := rollout.New(rollout.Config{Service: c.Service, Fleet: c.Fleet, Sources: c.Sources})
	if err := c.addJobs(rollouts.Job()); err != nil {
		return ad, wd, err
	}
	c.Service.OnPersonChange(rollouts.OnPersonChange)
	ad.Rollouts, wd.Rollouts = rollouts, rollouts
	// A person's plan that turns an L4/L5 switch of a protected app on
	// waits for approval; the approved request starts it.
	c.Service.OnApplyPending(audit.RolloutCreate, func(ctx context.Context, a server.Actor, p server.Pending) error {
		var in rollout.Input
		if err := json.Unmarshal(p.Body, &in); err != nil {
			return err
		}
		_, err := rollouts.Create(ctx, a, p.App, in)
		return err
	})

	// Drills: scheduled exercises of a switch through lease-bound overrides.
	var triggers *trigger.Service // built below; a run's report lists the rules it held
	drills := drill.New(drill.Config{Service: c.Service, Fleet: c.Fleet, Sources: c.Sources, Etcd: c.Etcd,
		Namespace: c.Config.Namespace, Logger: c.log, Egress: c.Egress, Keys: c.Keys,
		HeldRules: func(ctx context.Context, cause string, since time.Time) ([]string, error) {
			return triggers.HeldBy(ctx, cause, since)
		}})
	if err := c.addJobs(drills.Job()); err != nil {
		return ad, wd, err
	}
	ad.Drills, wd.Drills = drills, drills
	// A new or changed drill on a protected app waits for approval.
	c.Service.OnApplyPending(audit.DrillCreate, drills.ApplyHeld)
	c.Service.OnApplyPending(audit.DrillUpdate, drills.ApplyHeld)

	// Expiry, findings (never_drilled from the drills' last passing runs)
	// and notification channels.
	exp := expiry.New(c.Service, expiry.Config{
		Every: c.Config.ExpiryInterval, RemindBefore: c.Config.ExpiryRemindBefore, EscalateAfter: c.Config.ExpiryEscalateAfter,
	})
	c.Service.OnPersonChange(exp.OnPersonChange)
	channels := notify.New(c.Service, notify.Config{Namespace: c.Config.Namespace, Timeout: c.Config.NotifyTimeout, Logger: c.log, Egress: c.Egress, Keys: c.Keys})
	deliveries := channels.Job()
	c.deliveries = deliveries
	err := c.addJobs(exp.Job(), finding.NewJob(c.Service, finding.JobConfig{
		Every: c.Config.ExpiryInterval, Fleet: c.Fleet, LastPassed: drills.LastPassed, Logger: c.log,
	}), deliveries)
	if err != nil {
		return ad, wd, err
	}
	reg.MustRegister(newStateCollector(c.DB, channels, c.opts.now, c.log))
	ad.Expiry, ad.Channels = exp, channels
	wd.Expiry, wd.Channels = exp, channels

	// Auto-triggers: one leader job evaluates every rule; a person's change
	// to a switch pauses its rules; a rule reading the fleet signals of a
	// drilled app holds while the drill runs.
	triggers = trigger.New(c.Service, c.Sources, trigger.Config{Interval: c.Config.TriggerInterval, Plans: rollouts, Drills: drills, Logger: c.log})
	if err := c.addJobs(triggers.Job()); err != nil {
		return ad, wd, err
	}
	c.Service.OnPersonChange(triggers.OnPersonChange)
	ad.Triggers, wd.Triggers = triggers, triggers
	// A new or changed rule on a protected app waits for approval; the
	// approved request makes the same call again.
	c.Service.OnApplyPending(audit.TriggerCreate, func(ctx context.Context, a server.Actor, p server.Pending) error {
		var in trigger.Input
		if err := json.Unmarshal(p.Body, &in); err != nil {
			return err
		}
		_, err := triggers.Create(ctx, a, p.App, in)
		return err
	})
	c.Service.OnApplyPending(audit.TriggerUpdate, func(ctx context.Context, a server.Actor, p server.Pending) error {
		var patch trigger.Patch
		if err := json.Unmarshal(p.Body, &patch); err != nil {
			return err
		}
		_, err := triggers.Update(ctx, a, p.App, p.Name, patch)
		return err
	})

	// Approvals: held changes and their decisions reach the channels; a
	// break-glass opens a review that escalates when overdue.
	approvals := approval.New(c.Service)
	if err := c.addJobs(approvals.Job(time.Minute)); err != nil {
		return ad, wd, err
	}
	ad.Approvals = approvals

	// Retention: the leader prunes each domain's old history.
	err = c.addJobs(retention.New(retention.Config{Service: c.Service, Age: c.Config.Retention, Pruners: []retention.Pruner{
		{Kind: "drill_runs", Prune: drill.PruneRuns},
		{Kind: "findings", Prune: finding.PruneResolved},
		{Kind: "rollouts", Prune: rollout.PruneEnded},
		{Kind: "trigger_evaluations", Prune: trigger.PruneEvaluations},
		{Kind: "deliveries", Prune: notify.PruneDeliveries},
		{Kind: "notifications", Prune: notify.PruneEvents},
	}}))
	return ad, wd, err
}
