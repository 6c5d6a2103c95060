package webui

import (
	"github.com/gin-gonic/gin"

	"github.com/switchyard-io/switchyard/server/trigger"
)

func (h *handler) registerTriggers(in *gin.RouterGroup, svc *trigger.Service) {}
