package limit_test

import (
	"time"

	"github.com/switchyard-io/switchyard/sdk/wire"
)

const ms = time.Millisecond

// rule returns a valid rule of kind with edit applied.
func rule(kind string, edit func(r *wire.LimitRule)) *wire.LimitRule {
	r := &wire.LimitRule{App: "checkout", Resource: "POST /orders", Kind: kind, Mode: wire.ModeEnforce, Scope: wire.ScopeInstance}
	edit(r)
	return r
}
