package sdk

import (
	"fmt"
	"testing"

	"github.com/switchyard-io/switchyard/sdk/wire"
)

// TestBucketGolden pins the rollout hash. These vectors were cross-checked
// with an independent FNV-1a implementation. If this test fails, the hash
// changed and every rollout in the fleet would silently reshuffle: do not
// update the table, restore the function.
func TestBucketGolden(t *testing.T) {
	for _, tc := range []struct {
		app, name, key string
		want           int
	}{
		{"checkout", "recommend", "inst-00", 5772},
		{"checkout", "recommend", "inst-01", 3983},
		{"checkout", "recommend", "tenant-42", 9714},
		{"_global", "maintenance", "host-1234", 4735},
		{"a", "b", "", 7258},
		{"", "", " ", 6393},
		{"payments", "3ds.v2-check", "user/é", 2567},
		{"search", "ranking", "10.0.0.7-4242", 7238},
	} {
		if got := Bucket(tc.app, tc.name, tc.key); got != tc.want {
			t.Errorf("Bucket(%q, %q, %q) = %d, want %d", tc.app, tc.name, tc.key, got, tc.want)
		}
	}
}

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
