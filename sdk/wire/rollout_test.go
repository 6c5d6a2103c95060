package wire

import (
	"errors"
	"fmt"
	"testing"
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

// TestIncludes: membership follows state, selector and the instance's
// bucket; key stickiness includes every matching instance; widening only
// adds members.
func TestIncludes(t *testing.T) {
	sw := &Switch{App: "checkout", Name: "recommend", State: StateOn, Rollout: Rollout{Percent: 57.72}}
	if sw.Includes("inst-00", nil) { // bucket 5772 is not below 5772
		t.Error("inst-00 (bucket 5772) included at 57.72 %")
	}
	sw.Rollout.Percent = 57.73
	if !sw.Includes("inst-00", nil) {
		t.Error("inst-00 (bucket 5772) not included at 57.73 %")
	}
	sw.Rollout.Selector = "zone=a"
	if sw.Includes("inst-00", map[string]string{"zone": "b"}) || !sw.Includes("inst-00", map[string]string{"zone": "a"}) {
		t.Error("selector not applied")
	}
	sw.Rollout = Rollout{Percent: 0, Stickiness: StickyKey}
	if !sw.Includes("inst-00", nil) {
		t.Error("key stickiness: a matching instance takes part")
	}
	sw.State = StateOff
	if sw.Includes("inst-00", nil) {
		t.Error("an off switch includes nobody")
	}
	sw = &Switch{App: "checkout", Name: "x", State: StateOn}
	prev := map[string]bool{}
	for _, p := range []float64{0, 1, 5, 50, 100} {
		sw.Rollout.Percent = p
		for i := 0; i < 1000; i++ {
			id := fmt.Sprintf("inst-%d", i)
			in := sw.Includes(id, nil)
			if prev[id] && !in {
				t.Fatalf("widening to %v %% dropped %s", p, id)
			}
			prev[id] = in
		}
	}
}

// TestRolloutKeyListsValidate: each list is bounded in length and key
// size, and a key in both lists is refused by its index.
func TestRolloutKeyListsValidate(t *testing.T) {
	many := make([]string, MaxListKeys+1)
	for i := range many {
		many[i] = fmt.Sprintf("t%d", i)
	}
	for _, tc := range []struct {
		name  string
		r     Rollout
		field string
	}{
		{"at the limit", Rollout{Percent: 5, Include: many[:MaxListKeys], Exclude: []string{"x"}}, ""},
		{"over the limit", Rollout{Include: many}, "include"},
		{"empty key", Rollout{Exclude: []string{"a", ""}}, "exclude[1]"},
		{"control character", Rollout{Include: []string{"a\nb"}}, "include[0]"},
		{"key too long", Rollout{Include: []string{string(make([]byte, MaxListKeyLen+1))}}, "include[0]"},
		{"in both", Rollout{Include: []string{"a", "b"}, Exclude: []string{"c", "b"}}, "exclude[1]"},
	} {
		err := tc.r.Validate()
		var fe *FieldError
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.field != "" && (!errors.As(err, &fe) || fe.Field != tc.field):
			t.Errorf("%s: error %v, want one naming %s", tc.name, err, tc.field)
		}
	}
}
