package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/switchyard-io/switchyard/sdk/wire"
	"github.com/switchyard-io/switchyard/server"
)

// instances lists the SDK instances registered for the app in etcd.
func (h *handler) instances(c *gin.Context) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), 3*time.Second)
	defer cancel()
	resp, err := h.etcd.Get(ctx, wire.AppPrefix(h.ns, wire.KindInstances, c.Param("app")), clientv3.WithPrefix())
	if err != nil {
		fail(c, fmt.Errorf("%w: instances are read from etcd: %w", server.ErrEtcdUnavailable, err))
		return
	}
	list := make([]wire.Instance, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var in wire.Instance
		if json.Unmarshal(kv.Value, &in) == nil {
			list = append(list, in)
		}
	}
	c.JSON(http.StatusOK, gin.H{"instances": list, "revision": resp.Header.Revision})
}
