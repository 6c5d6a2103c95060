package server

import "github.com/switchyard-io/switchyard/sdk/wire"

// NeedsConfirmation reports whether leaving a switch on at level with
// rollout percent deserves a second, explicit confirmation before it is
// made: L4 fails every write and L5 queues them, and at 100 % no instance
// is left undegraded. The web UI asks for it; the API and approvals share
// the same policy.
func NeedsConfirmation(level wire.Level, percent float64) bool {
	return level == wire.L4 || level == wire.L5 || percent >= 100
}
