package server

import (
	"reflect"
	"testing"

	"github.com/switchyard-io/switchyard/sdk/wire"
)

type decodeGate struct {
	MinApplied *float64 `json:"min_applied"`
}

type decodeStep struct {
	Percent float64       `json:"percent"`
	Hold    wire.Duration `json:"hold"`
	Gate    *decodeGate   `json:"gate"`
}

type decodeBase struct {
	Name  string `json:"name"`
	Count int    `json:"count"`
}

type decodeInput struct {
	decodeBase
	// Count shadows the embedded member of the same JSON name.
	Count  *int              `json:"count"`
	Steps  []decodeStep      `json:"steps"`
	Labels map[string]string `json:"labels"`
	Skip   string            `json:"-"`
}

// TestDecodeJSON: every unknown member and every member of the wrong type
// is reported at once under its JSON path; the rest is decoded.
func TestDecodeJSON(t *testing.T) {
	cases := []struct {
		name, body string
		want       []string // field: message
	}{
		{"valid", `{"name":"a","count":2,"steps":[{"percent":5,"hold":"1m","gate":{"min_applied":0.9}}],"labels":{"a":"b"}}`, nil},
		{"every error at once",
			`{"name":7,"extra":true,"steps":[{"percent":5},{"percent":"5","hold":"soon","gate":{"min_applied":"x","more":1}}],"labels":{"a":1},"Skip":"x"}`,
			[]string{
				"name: must be a string",
				"extra: is not a known field",
				"steps[1].percent: must be a number",
				`steps[1].hold: duration "soon": time: invalid duration "soon"`,
				"steps[1].gate.min_applied: must be a number",
				"steps[1].gate.more: is not a known field",
				"labels.a: must be a string",
				"Skip: is not a known field",
			}},
		{"shadowed member takes the outer type", `{"count":"3"}`, []string{"count: must be an integer"}},
		{"object expected", `{"steps":[1],"gate":null,"labels":[]}`, []string{"steps[0]: must be an object", "gate: is not a known field", "labels: must be an object"}},
		{"array expected", `{"steps":{}}`, []string{"steps: must be an array"}},
		{"not an object", `[1]`, []string{"body: must be an object"}},
		{"not JSON", `{"name":`, []string{"body: is not valid JSON: unexpected EOF"}},
		{"trailing data", `{} {}`, []string{"body: must hold exactly one JSON object"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var in decodeInput
			var got []string
			for _, e := range DecodeJSON([]byte(tc.body), &in) {
				got = append(got, e.Error())
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("errors\n got %q\nwant %q", got, tc.want)
			}
			if (DecodeStrict([]byte(tc.body), &decodeInput{}) == nil) != (tc.want == nil) {
				t.Errorf("DecodeStrict disagrees with DecodeJSON")
			}
		})
	}
}

// TestDecodeJSONKeepsTheRest: the members that fit are decoded, so the
// caller's own checks see them.
func TestDecodeJSONKeepsTheRest(t *testing.T) {
	var in decodeInput
	errs := DecodeJSON([]byte(`{"name":"a","count":"x","steps":[{"percent":"5"},{"percent":7,"hold":"2s"}],"extra":1}`), &in)
	if len(errs) != 3 {
		t.Fatalf("errors: %v", errs)
	}
	if in.Name != "a" || in.Count != nil || len(in.Steps) != 2 || in.Steps[0].Percent != 0 || in.Steps[1].Percent != 7 || in.Steps[1].Hold.D().Seconds() != 2 {
		t.Fatalf("decoded %+v", in)
	}
}

// TestFieldErrorsOnePerField: the first error of a field is the one kept;
// AddErr flattens validation errors, field errors and joined errors under
// a prefix.
func TestFieldErrorsOnePerField(t *testing.T) {
	var v FieldErrors
	v.Add("range", "first")
	v.Add("range", "second")
	v.AddErr("steps[0]", &ValidationError{Fields: []*FieldError{{Field: "percent", Msg: "p"}}})
	v.AddErr("rollout", &wire.FieldError{Field: "selector", Msg: "s"})
	v.AddErr("", nil)
	got := v.Err().(*ValidationError).Fields
	want := []*FieldError{{Field: "range", Msg: "first"}, {Field: "steps[0].percent", Msg: "p"}, {Field: "rollout.selector", Msg: "s"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}
