package webui

import (
	"strings"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/sdk/wire"
	"github.com/switchyard-io/switchyard/server/rollout"
)

// TestTimelineKeepsTheRaise: a first step raised to reach an instance
// carries its raise into the steps to come, as the switch page's preview
// said; a step a person advanced shows when it ended, not when its hold
// would have.
func TestTimelineKeepsTheRaise(t *testing.T) {
	start := time.Date(2026, 12, 4, 18, 0, 0, 0, time.UTC)
	ended, ends := start.Add(time.Minute), start.Add(5*time.Minute)
	v := &rollout.View{App: "checkout", Switch: "recommend", Direction: rollout.DirectionOn, State: rollout.Running, Step: 1,
		Steps: []rollout.Step{{Percent: 1}, {Percent: 50}, {Percent: 100}}}
	raised := wire.Rollout{Percent: 98.9, Stickiness: wire.StickyInstance}
	v.History = []rollout.StepView{
		{StepRecord: rollout.StepRecord{Index: 0, Rollout: raised, Raised: "raised from 1 % to 98.9 %", StartedAt: start, EndedAt: &ended, Outcome: "advanced"}, Target: "98.9 %", HoldEndsAt: &ends},
	}
	rows := timeline(v)
	if len(rows) != 3 {
		t.Fatalf("%d rows, want 3", len(rows))
	}
	if rows[0].HoldEndsAt != nil || rows[0].EndedAt == nil {
		t.Errorf("the advanced step shows its hold ending at %v (ended %v)", rows[0].HoldEndsAt, rows[0].EndedAt)
	}
	if rows[1].Target != "98.9 %" || !strings.HasPrefix(rows[1].Raised, "kept at 98.9 %") {
		t.Errorf("step 2 to come: %q (%q), want 98.9 %% kept", rows[1].Target, rows[1].Raised)
	}
	if rows[2].Target != "100 %" || rows[2].Raised != "" {
		t.Errorf("step 3 to come: %q (%q)", rows[2].Target, rows[2].Raised)
	}
}

// TestWording: counts agree with their nouns; audit and finding targets
// link to their pages; a finding's report path is a link.
func TestWording(t *testing.T) {
	for _, tc := range []struct {
		n    any
		what string
		want string
	}{{1, "live instance", "1 live instance"}, {2, "live instance", "2 live instances"}, {int64(0), "event", "0 events"}, {3, "switch", "3 switches"}, {1, "transition", "1 transition"}} {
		if got := count(tc.n, tc.what); got != tc.want {
			t.Errorf("count(%v, %q) = %q, want %q", tc.n, tc.what, got, tc.want)
		}
	}
	for target, want := range map[string]string{
		"switch/checkout/recommend":    "/ui/apps/checkout/switches/recommend",
		"trigger/checkout/cpu-high":    "/ui/apps/checkout/triggers/cpu-high",
		"rollout/checkout/recommend#7": "/ui/apps/checkout/rollouts/7",
		"drill/checkout/reco":          "/ui/apps/checkout/drills/reco",
		"drill/checkout/reco#3":        "/ui/apps/checkout/drills/reco/runs/3",
		"rollout/checkout/recommend":   "",
		"rollout/checkout/recommend#x": "",
		"channel/ops":                  "",
		"user/alice":                   "",
	} {
		if got := targetURL(target); got != want {
			t.Errorf("targetURL(%q) = %q, want %q", target, got, want)
		}
	}
	for text, want := range map[string]string{
		"report: /ui/apps/checkout/drills/reco/runs/3": `report: <a href="/ui/apps/checkout/drills/reco/runs/3">/ui/apps/checkout/drills/reco/runs/3</a>`,
		"see /ui/x<script>":                            "see /ui/x&lt;script&gt;",
		"no path here":                                 "no path here",
	} {
		if got := string(linkPath(text)); got != want {
			t.Errorf("linkPath(%q) = %q, want %q", text, got, want)
		}
	}
}
