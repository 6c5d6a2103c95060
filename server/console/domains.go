package console

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/api"
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
// drills, expiry, findings, notification channels, auto-triggers: its
// leader jobs, its hook on people's changes to switches, the history the
// retention job prunes for it, its API routes and its pages. Every part
// is optional. The console builds each domain once (domains) and then
// treats them alike (runDomains).
type domain struct {
	jobs []lead.Job
	// onPersonChange runs inside the transaction of a person's change
	// (server.Service.OnPersonChange).
	onPersonChange func(*server.JobTx, server.PersonChange) error
	pruners        []retention.Pruner
	routes         api.Routes
	pages          webui.Pages
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

	return []domain{
		{
			jobs: []lead.Job{rollouts.Job()}, onPersonChange: rollouts.OnPersonChange,
			pruners: []retention.Pruner{{Kind: "rollouts", Prune: rollout.PruneEnded}},
			routes:  api.RolloutRoutes(rollouts), pages: webui.RolloutPages(rollouts),
		},
		{
			jobs: []lead.Job{drills.Job()}, onPersonChange: drills.OnPersonChange,
			pruners: []retention.Pruner{{Kind: "drill_runs", Prune: drill.PruneRuns}},
			routes:  api.DrillRoutes(drills), pages: webui.DrillPages(drills),
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
			routes:  api.TriggerRoutes(triggers), pages: webui.TriggerPages(triggers),
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
		pruners = append(pruners, d.pruners...)
		if d.routes != nil {
			routes = append(routes, d.routes)
		}
		pages = append(pages, d.pages)
	}
	err := c.addJobs(retention.New(retention.Config{Service: c.Service, Age: c.Config.Retention, Pruners: pruners}))
	return routes, pages, err
}
