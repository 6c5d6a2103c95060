package wire

import (
	"encoding/json"
	"testing"
)

// TestPointer: RFC 6901 parsing and resolution, including escapes, array
// indexes and members whose value is null.
func TestPointer(t *testing.T) {
	var doc any
	_ = json.Unmarshal([]byte(`{"items":[{"id":"a"}],"a/b":1,"m~n":2,"nil":null,"":3,"01":4}`), &doc)
	for _, tc := range []struct {
		ptr  string
		want bool
		bad  bool
	}{
		{"", true, false}, {"/items", true, false}, {"/items/0/id", true, false}, {"/items/1", false, false},
		{"/items/-", false, false}, {"/items/01", false, false}, {"/a~1b", true, false}, {"/m~0n", true, false},
		{"/nil", true, false}, {"/", true, false}, {"/01", true, false}, {"/missing", false, false}, {"/items/0/id/x", false, false},
		{"items", false, true}, {"/a~2", false, true}, {"/a~", false, true},
	} {
		p, err := ParsePointer(tc.ptr)
		if (err != nil) != tc.bad {
			t.Errorf("%q: parse error %v, want bad=%v", tc.ptr, err, tc.bad)
			continue
		}
		if !tc.bad && p.Resolve(doc) != tc.want {
			t.Errorf("%q: resolve %v, want %v", tc.ptr, !tc.want, tc.want)
		}
	}
}
