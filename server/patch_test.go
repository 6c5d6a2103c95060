package server

import (
	"encoding/json"
	"testing"
)

// TestMergePatch: the examples of RFC 7396, appendix A.
func TestMergePatch(t *testing.T) {
	for _, tc := range []struct{ target, patch, want string }{
		{`{"a":"b"}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"b"}`, `{"b":"c"}`, `{"a":"b","b":"c"}`},
		{`{"a":"b"}`, `{"a":null}`, `{}`},
		{`{"a":"b","b":"c"}`, `{"a":null}`, `{"b":"c"}`},
		{`{"a":["b"]}`, `{"a":"c"}`, `{"a":"c"}`},
		{`{"a":"c"}`, `{"a":["b"]}`, `{"a":["b"]}`},
		{`{"a":{"b":"c"}}`, `{"a":{"b":"d","c":null}}`, `{"a":{"b":"d"}}`},
		{`{"a":[{"b":"c"}]}`, `{"a":[1]}`, `{"a":[1]}`},
		{`["a","b"]`, `["c","d"]`, `["c","d"]`},
		{`{"a":"b"}`, `["c"]`, `["c"]`},
		{`{"a":"foo"}`, `null`, `null`},
		{`{"a":"foo"}`, `"bar"`, `"bar"`},
		{`{"e":null}`, `{"a":1}`, `{"a":1,"e":null}`},
		{`[1,2]`, `{"a":"b","c":null}`, `{"a":"b"}`},
		{`{}`, `{"a":{"bb":{"ccc":null}}}`, `{"a":{"bb":{}}}`},
		// Numbers keep the digits they were written with.
		{`{"n":9007199254740993}`, `{"m":0.1}`, `{"m":0.1,"n":9007199254740993}`},
		{`{"n":9007199254740993}`, `{}`, `{"n":9007199254740993}`},
	} {
		got := MergePatch([]byte(tc.target), []byte(tc.patch))
		if !jsonEqual(t, got, []byte(tc.want)) {
			t.Errorf("merge %s into %s: %s, want %s", tc.patch, tc.target, got, tc.want)
		}
	}
}

// TestPatchBookkeeping: reason and version are not fields of the entity;
// a body that is no JSON object is refused.
func TestPatchBookkeeping(t *testing.T) {
	var p Patch
	if err := json.Unmarshal([]byte(`{"version":3,"reason":"r","owner":null}`), &p); err != nil {
		t.Fatal(err)
	}
	if p.Version == nil || *p.Version != 3 || p.Reason != "r" || string(p.Fields) != `{"owner":null}` || !p.Names("owner") || p.Names("reason") {
		t.Fatalf("split: %+v (%s)", p, p.Fields)
	}
	for _, bad := range []string{`null`, `[1]`, `{"version":"3"}`} {
		if err := json.Unmarshal([]byte(bad), &p); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := decodeNumbers(a, &x); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := decodeNumbers(b, &y); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}
