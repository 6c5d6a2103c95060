package webui

import (
	"github.com/gin-gonic/gin"

	"github.com/switchyard-io/switchyard/server"
)

// Job domains (staged rollouts, auto-triggers, drills, expiry and
// findings) each add a section to the switch page and to the Overview, in
// files of their own: a template under web/templates/sections/ (defining
// "switch-<domain>" or "overview-<domain>") and a function here that loads
// its data. The page hands that data to the template as
// .Data.Sections.<key>.

// SwitchSection loads one domain's data for the page of switch sw; a nil
// result leaves the section out. An error shows at the top of the page,
// and the rest of the page still renders.
type SwitchSection func(c *gin.Context, sw *server.Switch) (any, error)

// OverviewSection loads one domain's data for the Overview.
type OverviewSection func(c *gin.Context) (any, error)

// sections returns the loaded data of the named sections, by key.
func loadSections[F any](c *gin.Context, named map[string]F, load func(F) (any, error)) (map[string]any, error) {
	out := make(map[string]any, len(named))
	var firstErr error
	for key, f := range named {
		v, err := load(f)
		if err != nil && firstErr == nil {
			firstErr = err
		}
		if v != nil {
			out[key] = v
		}
	}
	return out, firstErr
}

// switchSections loads every switch-page section of sw.
func (h *handler) switchSections(c *gin.Context, sw *server.Switch) (map[string]any, error) {
	return loadSections(c, h.onSwitch, func(f SwitchSection) (any, error) { return f(c, sw) })
}

// overviewSections loads every Overview section.
func (h *handler) overviewSections(c *gin.Context) (map[string]any, error) {
	return loadSections(c, h.onOverview, func(f OverviewSection) (any, error) { return f(c) })
}
