package sdk

import (
	"context"
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

// TestKeyLists: on an instance the selector matches, an excluded key is
// off, an included key on, any other decided by the percent (key
// stickiness) or the instance (instance stickiness); a request without a
// key gets the instance decision; an off switch or a selector that leaves
// the instance out ignores the lists.
func TestKeyLists(t *testing.T) {
	c := newTestClient(t, Config{InstanceID: "inst-7", Labels: map[string]string{"zone": "a"}})
	h := c.Switch("tenants")
	rev := int64(0)
	publish := func(state string, percent float64, sticky, selector string) {
		t.Helper()
		sw := mkSwitch("checkout", "tenants", state, percent)
		sw.Rollout.Stickiness, sw.Rollout.Selector = sticky, selector
		sw.Rollout.Include, sw.Rollout.Exclude = []string{"vip", "beta"}, []string{"audit"}
		rev++
		publishLive(t, c, rev, []*wire.Switch{sw})
	}
	ctx := func(key string) context.Context { return WithKey(context.Background(), key) }
	for _, tc := range []struct {
		name                     string
		state                    string
		percent                  float64
		sticky, selector         string
		vip, audit, other, nokey bool
	}{
		{"key stickiness 0 %", wire.StateOn, 0, wire.StickyKey, "", true, false, false, false},
		{"key stickiness 100 %", wire.StateOn, 100, wire.StickyKey, "", true, false, true, true},
		{"instance stickiness 0 %", wire.StateOn, 0, wire.StickyInstance, "", true, false, false, false},
		{"instance stickiness 100 %", wire.StateOn, 100, wire.StickyInstance, "", true, false, true, true},
		{"selector matches", wire.StateOn, 0, wire.StickyKey, "zone=a", true, false, false, false},
		{"selector leaves the instance out", wire.StateOn, 100, wire.StickyKey, "zone=b", false, false, false, false},
		{"off", wire.StateOff, 100, wire.StickyKey, "", false, false, false, false},
	} {
		publish(tc.state, tc.percent, tc.sticky, tc.selector)
		got := [4]bool{h.On(ctx("vip")), h.On(ctx("audit")), h.On(ctx("someone")), h.On(context.Background())}
		if want := [4]bool{tc.vip, tc.audit, tc.other, tc.nokey}; got != want {
			t.Errorf("%s: vip, audit, other, no key = %v, want %v", tc.name, got, want)
		}
		if c.On(ctx("vip"), "tenants") != tc.vip {
			t.Errorf("%s: Client.On disagrees with the handle for vip", tc.name)
		}
	}
}

// TestKeySet: at the list limits every included key is found included,
// every excluded key excluded (also when a key is in both: exclude wins),
// and keys in neither list are not found.
func TestKeySet(t *testing.T) {
	seed := wire.Seed("checkout", "tenants")
	in, out := keyList("vip", wire.MaxListKeys), keyList("audit", wire.MaxListKeys)
	out[0] = in[0]
	s := newKeySet(seed, wire.Rollout{Include: in, Exclude: out})
	look := func(k string) (bool, bool) { return s.lookup(wire.FNV(seed, k), k) }
	for i, k := range in {
		if on, listed := look(k); !listed || on != (i != 0) {
			t.Fatalf("included %s: on=%v listed=%v", k, on, listed)
		}
	}
	for _, k := range out {
		if on, listed := look(k); !listed || on {
			t.Fatalf("excluded %s: on=%v listed=%v", k, on, listed)
		}
	}
	for i := range 50000 {
		if k := fmt.Sprintf("tenant-%d", i); func() bool { _, l := look(k); return l }() {
			t.Fatalf("%s found in the lists", k)
		}
	}
	if s.len() != 2*wire.MaxListKeys-1 {
		t.Errorf("len %d, want %d", s.len(), 2*wire.MaxListKeys-1)
	}
	if newKeySet(seed, wire.Rollout{Percent: 5}) != nil {
		t.Error("a rollout without lists has a key set")
	}
}
