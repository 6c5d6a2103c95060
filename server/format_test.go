package server

import (
	"testing"
	"time"
)

func TestShortDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		72 * time.Hour:                   "72h",
		90 * time.Minute:                 "1h30m",
		5 * time.Minute:                  "5m",
		42 * time.Second:                 "42s",
		time.Hour + 30*time.Second:       "1h0m30s",
		1500 * time.Millisecond:          "1.5s",
		0:                                "0s",
		2*time.Hour + 10*time.Minute + 0: "2h10m",
	} {
		if got := ShortDuration(d); got != want {
			t.Errorf("ShortDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestParseDuration(t *testing.T) {
	for s, want := range map[string]time.Duration{
		"6h": 6 * time.Hour, "90m": 90 * time.Minute, "7d": 7 * 24 * time.Hour, "1d12h": 36 * time.Hour,
		"1.5d": 36 * time.Hour, " 2d ": 48 * time.Hour, "-1d": -24 * time.Hour, "0d": 0, "1d30m15s": 24*time.Hour + 30*time.Minute + 15*time.Second,
	} {
		if got, err := ParseDuration(s); err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	for _, s := range []string{"", "d", "7", "forever", "1e3d", "NaNd", "0x1d", "1d-2h", "1d+2h", "1dd", "1h2d", "7 d", "--1d"} {
		if d, err := ParseDuration(s); err == nil {
			t.Errorf("ParseDuration(%q) = %v, want an error", s, d)
		}
	}
}

// TestCanonicalDuration: a duration as written is answered in one form;
// what does not parse stays as it is.
func TestCanonicalDuration(t *testing.T) {
	for in, want := range map[string]string{
		"7d": "168h", "1d12h": "36h", "90m": "1h30m", "1h0m0s": "1h", "72h0m0s": "72h", "300s": "5m",
		"2000ms": "2s", "0s": "0s", "": "", "soon": "soon",
	} {
		if got := CanonicalDuration(in); got != want {
			t.Errorf("CanonicalDuration(%q) = %q, want %q", in, got, want)
		}
	}
}
