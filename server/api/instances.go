package api

import (
	"context"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/fleet"
)

// The fleet's views come from the console's fleet model, fed by one etcd
// watch, never from a read of etcd per request. Each answer says whether
// the model is in sync with etcd: while it is not (etcd unreachable), it
// shows what was last known.

// syncWait bounds how long a request waits for a model that is listing
// (right after the console started, or after etcd came back).
const syncWait = 2 * time.Second

// instances lists the live SDK instances of the app with their signals,
// by id, a page at a time.
func (h *handler) instances(c *gin.Context) {
	pg, ok := readPage(c, nil)
	if !ok {
		return
	}
	synced := h.waitSynced(c)
	list, next := server.CutSorted(h.fleet.Instances(c.Param("app")), pg, func(in *fleet.InstanceView) string { return in.ID })
	answerPage(c, gin.H{"instances": list, "revision": h.fleet.Revision(), "synced": synced}, next)
}

// switchSignals is the fleet's view of one switch: who applied it, who is
// in its rollout, who answers it degraded and how often, when it was last
// read, and the degraded-path p99.
func (h *handler) switchSignals(c *gin.Context) {
	synced := h.waitSynced(c)
	c.JSON(http.StatusOK, gin.H{"signals": h.fleet.Switch(c.Param("app"), c.Param("name")), "revision": h.fleet.Revision(), "synced": synced})
}

// limitSignals is the fleet's view of one limit rule.
func (h *handler) limitSignals(c *gin.Context) {
	synced := h.waitSynced(c)
	c.JSON(http.StatusOK, gin.H{"signals": h.fleet.Limit(c.Param("app"), c.Param("resource")), "revision": h.fleet.Revision(), "synced": synced})
}

func (h *handler) waitSynced(c *gin.Context) bool {
	ctx, cancel := context.WithTimeout(c.Request.Context(), syncWait)
	defer cancel()
	return h.fleet.WaitSynced(ctx)
}
