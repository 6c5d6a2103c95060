package webui

import (
	"time"

	"github.com/switchyard-io/switchyard/sdk/limit"
	"github.com/switchyard-io/switchyard/sdk/wire"
)

// signInThrottle bounds password guessing: every sign-in attempt takes a
// token from the bucket of its username and from the bucket of its client
// address. Per username: a burst of 5, then one every 12 s; per address: a
// burst of 20, then one every 3 s. Key state is capped and expires, so a
// flood of made-up names cannot exhaust memory.
type signInThrottle struct {
	byUser, byAddr *limit.Keyed
}

func newSignInThrottle(clock limit.Clock) *signInThrottle {
	bucket := func(perMinute float64, burst int) *limit.Keyed {
		k, err := limit.NewKeyed(&wire.LimitRule{
			App: "switchyard-console", Resource: "sign-in", Kind: wire.KindTokenBucket,
			Mode: wire.ModeEnforce, Scope: wire.ScopeInstance,
			Rate: perMinute / 60, Burst: burst,
			KeyBy: wire.KeyBy{Source: "context", MaxKeys: 10_000, TTL: wire.Duration(30 * time.Minute)},
		}, clock)
		if err != nil {
			panic("webui: sign-in throttle rule: " + err.Error()) // a constant rule; cannot fail
		}
		return k
	}
	return &signInThrottle{byUser: bucket(5, 5), byAddr: bucket(20, 20)}
}

// admit takes one attempt for username from addr; when refused it says how
// long to wait.
func (t *signInThrottle) admit(username, addr string) (ok bool, retryAfter time.Duration) {
	_, du := t.byUser.Admit(username)
	_, da := t.byAddr.Admit(addr)
	if du.OK && da.OK {
		return true, 0
	}
	return false, max(du.RetryAfter, da.RetryAfter)
}
