package console

import (
	"github.com/switchyard-io/switchyard/server/api"
	"github.com/switchyard-io/switchyard/server/drill"
	"github.com/switchyard-io/switchyard/server/rollout"
	"github.com/switchyard-io/switchyard/server/webui"
)

// wireDomains builds the job domains — staged rollouts, auto-triggers,
// drills, expiry and findings, notification channels — on the console's
// service, fleet model and metric sources, registers their leader jobs on
// the scheduler and their person-change hooks on the service, and returns
// what the API and the web UI need of them. Each domain is one block here.
func (c *Console) wireDomains() (api.Domains, webui.Domains, error) {
	var (
		ad api.Domains
		wd webui.Domains
	)

	// Staged rollouts: the leader advances the plans; a person's change
	// to a switch pauses its plan.
	rollouts := rollout.New(rollout.Config{Service: c.Service, Fleet: c.Fleet, Sources: c.Sources})
	c.Scheduler.Add(rollouts.Job())
	c.Service.OnPersonChange(rollouts.OnPersonChange)
	ad.Rollouts, wd.Rollouts = rollouts, rollouts

	// Drills: scheduled exercises of a switch through lease-bound overrides.
	drills := drill.New(drill.Config{Service: c.Service, Fleet: c.Fleet, Sources: c.Sources, Etcd: c.Etcd,
		Namespace: c.Config.Namespace, Logger: c.log})
	c.Scheduler.Add(drills.Job())
	ad.Drills, wd.Drills = drills, drills

	return ad, wd, nil
}
