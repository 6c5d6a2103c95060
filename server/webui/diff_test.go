package webui

import (
	"reflect"
	"testing"

	"github.com/switchyard-io/switchyard/audit"
)

func TestDiff(t *testing.T) {
	for _, tc := range []struct {
		name, before, after string
		want                []Change
	}{
		{"created", ``, `{"state":"off","version":1,"owner":"a"}`, []Change{{"state", "", "off"}, {"owner", "", "a"}}},
		{"deleted", `{"state":"on"}`, ``, []Change{{"state", "on", ""}}},
		{"nested rollout", `{"rollout":{"percent":25,"stickiness":"instance"},"updated_at":"x"}`, `{"rollout":{"percent":100,"stickiness":"instance"},"updated_at":"y"}`,
			[]Change{{"rollout.percent", "25", "100"}}},
		{"fallback stays whole", `{"fallback":{"a":1}}`, `{"fallback":{"a":2}}`, []Change{{"fallback", `{"a":1}`, `{"a":2}`}}},
		{"unchanged", `{"a":1}`, `{"a":1}`, nil},
		// What an operator looks for comes first; times read to the second.
		{"state first, times last", `{"state":"on","expires_at":"2026-12-04T09:01:34.790043209Z","on_since":"2026-12-01T09:01:34.790043209Z","owner":"a","rollout":{"percent":100}}`,
			`{"state":"off","expires_at":null,"on_since":null,"owner":"b","rollout":{"percent":5}}`,
			[]Change{{"state", "on", "off"}, {"rollout.percent", "100", "5"}, {"owner", "a", "b"}, {"expires_at", "2026-12-04 09:01:34 UTC", ""}, {"on_since", "2026-12-01 09:01:34 UTC", ""}}},
		{"key lists show counts and what moved", `{"rollout":{"percent":5,"include":["t1","t2"]}}`, `{"rollout":{"percent":5,"include":["t2","t3","t4"],"exclude":["a"]}}`,
			[]Change{{"rollout.exclude", "0 keys", "1 key: +a"}, {"rollout.include", "2 keys", "3 keys: +t3 +t4 −t1"}}},
		{"a limit's mode before its parameters", `{"mode":"shadow","rate":1}`, `{"mode":"enforce","rate":2}`, []Change{{"mode", "shadow", "enforce"}, {"rate", "1", "2"}}},
	} {
		if got := diff(tc.before, tc.after); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestSafeNext(t *testing.T) {
	for in, want := range map[string]string{
		"/ui/switches?app=x": "/ui/switches?app=x", "//evil.example/ui/": "/ui/", "https://evil.example/": "/ui/",
		"/ui/\\evil": "/ui/", "": "/ui/", "/api/v1/tokens": "/ui/",
	} {
		if got := safeNext(in); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestRestorable: only a change of the switch that recorded its state
// offers a rollback; a job's own event on the switch and drift do not.
func TestRestorable(t *testing.T) {
	rows := eventRows([]audit.Event{
		{ID: 1, Action: audit.SwitchOn, After: `{"state":"on"}`},
		{ID: 2, Action: audit.TriggerTransition, After: `{"state":"pending_on"}`},
		{ID: 3, Action: audit.Drift, After: `{"state":"on"}`},
		{ID: 4, Action: audit.SwitchDelete},
	})
	for i, want := range []bool{true, false, false, false} {
		if rows[i].Restorable != want {
			t.Errorf("event %d (%s): restorable %v, want %v", rows[i].ID, rows[i].Action, rows[i].Restorable, want)
		}
	}
}
