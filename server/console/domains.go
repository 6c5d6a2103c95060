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
	"github.com/switchyard-io/switchyard/server/lead"
	"github.com/switchyard-io/switchyard/server/notify"
	"github.com/switchyard-io/switchyard/server/retention"
	"github.com/switchyard-io/switchyard/server/rollout"
	"github.com/switchyard-io/switchyard/server/trigger"
	"github.com/switchyard-io/switchyard/server/webui"
)

// domain is one job domain as the console runs it — staged rollouts,
// drills, expiry, findings, notification channels, auto-triggers,
// break-glass reviews: its leader jobs, its hook on people's changes to
// switches, how its held changes apply once approved, the history the
// retention job prunes for it, its API routes and its pages. Every part
// is optional. The console builds each domain once (domains) and then
// treats them alike (runDomains).
type domain struct {
	jobs []lead.Job
	// onPersonChange runs inside the transaction of a person's change
	// (server.Service.OnPersonChange).
	onPersonChange func(*server.JobTx, server.PersonChange) error
	pruners        []retention.Pruner
	// applyHeld makes the domain's changes that an approval policy held
	// once their request is approved, by kind (server.Service.OnApplyPending).
	applyHeld map[audit.Action]func(context.Context, server.Actor, server.Pending) error
	routes    api.Routes
	pages     webui.Pages
}

// domains builds the job domains on the console's service, fleet model
// and metric sources, in the order their jobs are registered and their
// hooks run, and registers their state metrics (open findings, failing
// deliveries) on reg.
func (c *Console) domains(reg prometheus.Registerer) []domain {
	// Staged rollouts: the leader advances the plans; a person's change
	// to a switch pauses its plan.
	rollouts := rollout.New(rollout.Config{Service: c.Service, Fleet: c.Fleet, Sources: c.Sources})

	// Drills: scheduled exercises of a switch through lease-bound
	// overrides; a person's change to the switch ends its drill; a run's
	// report lists the rules it held.
	var triggers *trigger.Service // built below
	drills := drill.New(drill.Config{Service: c.Service, Fleet: c.Fleet, Sources: c.Sources, Etcd: c.Etcd,
		Namespace: c.Config.Namespace, Logger: c.log, Egress: c.Egress, Keys: c.Keys,
		HeldRules: func(ctx context.Context, cause string, since time.Time) ([]string, error) {
			return triggers.HeldBy(ctx, cause, since)
		}})

	// Expiry, findings (never_drilled from the drills' last passing runs)
	// and notification channels.
	exp := expiry.New(c.Service, expiry.Config{
		Every: c.Config.ExpiryInterval, RemindBefore: c.Config.ExpiryRemindBefore, EscalateAfter: c.Config.ExpiryEscalateAfter,
	})
	findings := finding.NewJob(c.Service, finding.JobConfig{
		Every: c.Config.ExpiryInterval, Fleet: c.Fleet, LastPassed: drills.LastPassed, Logger: c.log,
	})
	channels := notify.New(c.Service, notify.Config{Namespace: c.Config.Namespace, Timeout: c.Config.NotifyTimeout, Logger: c.log, Egress: c.Egress, Keys: c.Keys})
	deliveries := channels.Job()
	c.deliveries = deliveries
	reg.MustRegister(newStateCollector(c.DB, channels, c.opts.now, c.log))

	// Auto-triggers: one leader job evaluates every rule; a person's change
	// to a switch pauses its rules; a rule reading the fleet signals of a
	// drilled app holds while the drill runs.
	triggers = trigger.New(c.Service, c.Sources, trigger.Config{Interval: c.Config.TriggerInterval, Plans: rollouts, Drills: drills, Logger: c.log})

	// Approvals: held changes and their decisions reach the channels; a
	// break-glass opens a review that escalates when overdue.
	approvals := approval.New(c.Service)

	return []domain{
		{
			jobs: []lead.Job{rollouts.Job()}, onPersonChange: rollouts.OnPersonChange,
			pruners: []retention.Pruner{{Kind: "rollouts", Prune: rollout.PruneEnded}},
			// A person's plan that turns an L4/L5 switch of a protected
			// app on waits for approval; the approved request starts it.
			applyHeld: map[audit.Action]func(context.Context, server.Actor, server.Pending) error{
				audit.RolloutCreate: func(ctx context.Context, a server.Actor, p server.Pending) error {
					var in rollout.Input
					if err := json.Unmarshal(p.Body, &in); err != nil {
						return err
					}
					_, err := rollouts.Create(ctx, a, p.App, in)
					return err
				},
			},
			routes: api.RolloutRoutes(rollouts), pages: webui.RolloutPages(rollouts),
		},
		{
			jobs: []lead.Job{drills.Job()}, onPersonChange: drills.OnPersonChange,
			pruners: []retention.Pruner{{Kind: "drill_runs", Prune: drill.PruneRuns}},
			// A new or changed drill on a protected app waits for approval.
			applyHeld: map[audit.Action]func(context.Context, server.Actor, server.Pending) error{
				audit.DrillCreate: drills.ApplyHeld, audit.DrillUpdate: drills.ApplyHeld,
			},
			routes: api.DrillRoutes(drills), pages: webui.DrillPages(drills),
		},
		{
			jobs: []lead.Job{exp.Job()}, onPersonChange: exp.OnPersonChange,
			routes: api.ExpiryRoutes(exp), pages: webui.ExpiryPages(exp),
		},
		{
			jobs:    []lead.Job{findings},
			pruners: []retention.Pruner{{Kind: "findings", Prune: finding.PruneResolved}},
			routes:  api.FindingRoutes(exp.Findings()),
		},
		{
			jobs: []lead.Job{deliveries},
			pruners: []retention.Pruner{
				{Kind: "deliveries", Prune: notify.PruneDeliveries},
				{Kind: "notifications", Prune: notify.PruneEvents},
			},
			routes: api.ChannelRoutes(channels), pages: webui.ChannelPages(channels),
		},
		{
			jobs: []lead.Job{triggers.Job()}, onPersonChange: triggers.OnPersonChange,
			pruners: []retention.Pruner{{Kind: "trigger_evaluations", Prune: trigger.PruneEvaluations}},
			// A new or changed rule on a protected app waits for approval;
			// the approved request makes the same call again.
			applyHeld: map[audit.Action]func(context.Context, server.Actor, server.Pending) error{
				audit.TriggerCreate: func(ctx context.Context, a server.Actor, p server.Pending) error {
					var in trigger.Input
					if err := json.Unmarshal(p.Body, &in); err != nil {
						return err
					}
					_, err := triggers.Create(ctx, a, p.App, in)
					return err
				},
				audit.TriggerUpdate: func(ctx context.Context, a server.Actor, p server.Pending) error {
					var patch trigger.Patch
					if err := json.Unmarshal(p.Body, &patch); err != nil {
						return err
					}
					_, err := triggers.Update(ctx, a, p.App, p.Name, patch)
					return err
				},
			},
			routes: api.TriggerRoutes(triggers), pages: webui.TriggerPages(triggers),
		},
		{
			jobs:   []lead.Job{approvals.Job(time.Minute)},
			routes: api.ReviewRoutes(approvals),
		},
	}
}

// runDomains registers each domain's jobs on the scheduler and its hook
// on the service, then the retention job over all their pruners, and
// returns their routes and pages for the API and the web UI.
func (c *Console) runDomains(ds []domain) ([]api.Routes, []webui.Pages, error) {
	var (
		routes  []api.Routes
		pages   []webui.Pages
		pruners []retention.Pruner
	)
	for _, d := range ds {
		if err := c.addJobs(d.jobs...); err != nil {
			return nil, nil, err
		}
		if d.onPersonChange != nil {
			c.Service.OnPersonChange(d.onPersonChange)
		}
		for kind, apply := range d.applyHeld {
			c.Service.OnApplyPending(kind, apply)
		}
		pruners = append(pruners, d.pruners...)
		if d.routes != nil {
			routes = append(routes, d.routes)
		}
		pages = append(pages, d.pages)
	}
	err := c.addJobs(retention.New(retention.Config{Service: c.Service, Age: c.Config.Retention, Pruners: pruners}))
	return routes, pages, err
}
