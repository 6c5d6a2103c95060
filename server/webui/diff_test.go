package webui

import (
	"reflect"
	"testing"
)

func TestDiff(t *testing.T) {
	for _, tc := range []struct {
		name, before, after string
		want                []Change
	}{
		{"created", ``, `{"state":"off","version":1,"owner":"a"}`, []Change{{"owner", "", "a"}, {"state", "", "off"}}},
		{"deleted", `{"state":"on"}`, ``, []Change{{"state", "on", ""}}},
		{"nested rollout", `{"rollout":{"percent":25,"stickiness":"instance"},"updated_at":"x"}`, `{"rollout":{"percent":100,"stickiness":"instance"},"updated_at":"y"}`,
			[]Change{{"rollout.percent", "25", "100"}}},
		{"fallback stays whole", `{"fallback":{"a":1}}`, `{"fallback":{"a":2}}`, []Change{{"fallback", `{"a":1}`, `{"a":2}`}}},
		{"unchanged", `{"a":1}`, `{"a":1}`, nil},
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
