// Package ginx adapts the Switchyard SDK's request guard to gin: limit
// rules by route, L4 read-only and L5 queued writes, with the same answers
// (429/503 problem documents, 202 for queued writes) as the SDK's net/http
// middleware, which it reuses through sdk.HTTPGuard.
//
// It lives outside package sdk so that services without gin do not link it.
package ginx

import (
	"github.com/gin-gonic/gin"

	"github.com/switchyard-io/switchyard/sdk"
)

// Middleware returns gin middleware guarding every request (see
// sdk.Client.Middleware for the behaviour). The default resource is
// "METHOD route" with gin's route pattern ("GET /orders/:id"), or
// "METHOD path" for unrouted requests; opts.Resource overrides it and
// opts.Mux is ignored. A 5xx answer or a panic counts as a failure for
// breaker and adaptive rules.
func Middleware(c *sdk.Client, opts sdk.MiddlewareOptions) gin.HandlerFunc {
	custom := opts.Resource
	opts.Mux = nil
	g := c.HTTPGuard(opts)
	return func(gc *gin.Context) {
		var res string
		switch {
		case custom != nil:
			res = custom(gc.Request)
		case gc.FullPath() != "":
			res = gc.Request.Method + " " + gc.FullPath()
		default:
			res = sdk.RouteResource(gc.Request)
		}
		r, en, ok := g.Enter(gc.Writer, gc.Request, res)
		if !ok {
			gc.Abort()
			return
		}
		gc.Request = r
		done := false
		defer func() {
			if !done {
				en.Exit(false)
			}
		}()
		gc.Next()
		done = true
		en.Exit(gc.Writer.Status() < 500)
	}
}
