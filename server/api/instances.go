package api

import (
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/switchyard-io/switchyard/server"
)

// instances lists the live SDK instances of the app with their signals,
// from the fleet model.
func (h *handler) instances(c *gin.Context) {
	if !h.fleetSynced(c) {
		return
	}
	app := c.Param("app")
	c.JSON(http.StatusOK, gin.H{"instances": h.fleet.Instances(app), "revision": h.fleet.Revision()})
}

// switchSignals is the fleet's view of one switch: who applied it, who is
// in its rollout, who answers it degraded and how often, when it was last
// read, and the degraded-path p99.
func (h *handler) switchSignals(c *gin.Context) {
	if !h.fleetSynced(c) {
		return
	}
	v := h.fleet.Switch(c.Param("app"), c.Param("name"))
	c.JSON(http.StatusOK, gin.H{"signals": v, "revision": h.fleet.Revision()})
}

// limitSignals is the fleet's view of one limit rule.
func (h *handler) limitSignals(c *gin.Context) {
	if !h.fleetSynced(c) {
		return
	}
	c.JSON(http.StatusOK, gin.H{"signals": h.fleet.Limit(c.Param("app"), c.Param("resource")), "revision": h.fleet.Revision()})
}

// fleetSynced answers 503 when the fleet model is not in sync with etcd:
// what it holds may be out of date.
func (h *handler) fleetSynced(c *gin.Context) bool {
	if !h.fleet.Synced() {
		fail(c, fmt.Errorf("%w: the fleet model is not in sync with etcd", server.ErrEtcdUnavailable))
		return false
	}
	return true
}
