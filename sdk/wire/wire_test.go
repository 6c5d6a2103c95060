package wire

import (
	"errors"
	"math"
	"testing"
)

// TestRolloutValidatePercent: out-of-range and non-numbers are refused by
// name; two decimals pass, three do not.
func TestRolloutValidatePercent(t *testing.T) {
	for _, tc := range []struct {
		percent float64
		ok      bool
	}{
		{0, true}, {12.34, true}, {100, true},
		{-0.01, false}, {100.01, false}, {12.345, false},
		{math.NaN(), false}, {math.Inf(1), false}, {math.Inf(-1), false},
	} {
		err := Rollout{Percent: tc.percent}.Validate()
		if tc.ok != (err == nil) {
			t.Errorf("percent %v: err %v, want ok=%v", tc.percent, err, tc.ok)
			continue
		}
		var fe *FieldError
		if err != nil && (!errors.As(err, &fe) || fe.Field != "percent") {
			t.Errorf("percent %v: error %v does not name the field", tc.percent, err)
		}
	}
}
