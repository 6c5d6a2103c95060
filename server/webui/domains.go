package webui

import (
	"github.com/gin-gonic/gin"

	"github.com/switchyard-io/switchyard/server/drill"
	"github.com/switchyard-io/switchyard/server/expiry"
	"github.com/switchyard-io/switchyard/server/notify"
	"github.com/switchyard-io/switchyard/server/rollout"
	"github.com/switchyard-io/switchyard/server/trigger"
)

// Pages are one job domain's pages: mount puts them on the signed-in,
// CSRF-checked group and registers the domain's sections of the switch
// page and the Overview (sections.go). Each domain has a file of pages
// here; the console hands New the pages of the domains it runs
// (Deps.Domains).
type Pages struct {
	mount func(h *handler, in *gin.RouterGroup)
}

// DrillPages are the drill and run pages and the switch page's drills
// (drills.go).
func DrillPages(svc *drill.Service) Pages {
	return Pages{func(h *handler, in *gin.RouterGroup) { drillPages{h, svc}.register(in) }}
}

// ExpiryPages are the switch page's expiry banner and renew form, the
// Overview's findings and the Findings page (expiry.go).
func ExpiryPages(svc *expiry.Service) Pages {
	return Pages{func(h *handler, in *gin.RouterGroup) { h.registerExpiry(in, svc) }}
}

// ChannelPages are the notification channels page (channels.go).
func ChannelPages(svc *notify.Service) Pages {
	return Pages{func(h *handler, in *gin.RouterGroup) { h.registerChannels(in, svc) }}
}

// TriggerPages are the auto-trigger rule pages and the switch page's
// rules (triggers.go).
func TriggerPages(svc *trigger.Service) Pages {
	return Pages{func(h *handler, in *gin.RouterGroup) { h.registerTriggers(in, svc) }}
}

// RolloutPages are the staged rollout pages and the switch page's
// rollout section (rollouts.go).
func RolloutPages(svc *rollout.Service) Pages {
	return Pages{func(h *handler, in *gin.RouterGroup) { rolloutPages{h, svc}.register(in) }}
}
