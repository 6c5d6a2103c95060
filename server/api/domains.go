package api

import (
	"github.com/gin-gonic/gin"

	"github.com/switchyard-io/switchyard/server/drill"
	"github.com/switchyard-io/switchyard/server/expiry"
	"github.com/switchyard-io/switchyard/server/finding"
	"github.com/switchyard-io/switchyard/server/notify"
	"github.com/switchyard-io/switchyard/server/rollout"
	"github.com/switchyard-io/switchyard/server/trigger"
)

// Routes mount one job domain's API: apps is /api/v1/apps/:app (the app
// checked), v1 is /api/v1; both authenticated. Each domain has a file of
// handlers here; the console hands Register the routes of the domains it
// runs (Config.Domains).
type Routes func(apps, v1 *gin.RouterGroup)

// DrillRoutes are the drills and their runs (drills.go).
func DrillRoutes(svc *drill.Service) Routes {
	return func(apps, _ *gin.RouterGroup) { drills{svc}.register(apps) }
}

// ExpiryRoutes renew switches (expiry.go).
func ExpiryRoutes(svc *expiry.Service) Routes {
	return func(apps, _ *gin.RouterGroup) { registerExpiry(apps, svc) }
}

// FindingRoutes list and acknowledge the findings (findings.go).
func FindingRoutes(svc *finding.Service) Routes {
	return func(_, v1 *gin.RouterGroup) { registerFindings(v1, svc) }
}

// ChannelRoutes are the notification channels and their delivery log
// (channels.go).
func ChannelRoutes(svc *notify.Service) Routes {
	return func(_, v1 *gin.RouterGroup) { registerChannels(v1, svc) }
}

// TriggerRoutes are the auto-trigger rules (triggers.go).
func TriggerRoutes(svc *trigger.Service) Routes {
	return func(apps, _ *gin.RouterGroup) { registerTriggers(apps, svc) }
}

// RolloutRoutes are the staged rollouts (rollouts.go).
func RolloutRoutes(svc *rollout.Service) Routes {
	return func(apps, _ *gin.RouterGroup) { registerRollouts(apps, svc) }
}
