package sdk

import (
	"fmt"
	"testing"

	"github.com/switchyard-io/switchyard/sdk/wire"
)

// The hash's golden vectors are in sdk/wire/rollout_test.go (wire.Bucket,
// which Bucket delegates to); these tests cover the SDK's precomputed
// decision built on it.

func TestWideningOnlyAddsMembers(t *testing.T) {
	percents := []float64{0, 0.01, 1, 5, 12.34, 50, 99.99, 100}
	for i := range 2000 {
		key := fmt.Sprintf("k%d", i)
		was := false
		for _, p := range percents {
			sw := mkSwitch("checkout", "x", wire.StateOn, p)
			e := buildEntry(sw, SourceLive, key, selectorMatcher(nil))
			if was && !e.on {
				t.Fatalf("key %s left the rollout when widening to %v%%", key, p)
			}
			was = e.on
			if p == 0 && e.on || p == 100 && !e.on {
				t.Fatalf("key %s: %v%% gives %v", key, p, e.on)
			}
		}
	}
}

func TestRolloutSpread(t *testing.T) {
	in := 0
	for i := range 100000 {
		if Bucket("checkout", "x", fmt.Sprintf("tenant-%d", i)) < 500 {
			in++
		}
	}
	if in < 4500 || in > 5500 {
		t.Errorf("5%% rollout picked %d of 100000 keys", in)
	}
}
