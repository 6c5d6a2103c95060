package oneline

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestClean(t *testing.T) {
	for _, c := range []struct {
		in   string
		max  int
		want string
	}{
		{"  plain  ", 0, "plain"},
		{"line one\nline two\ttab\x1b[31m", 0, "line one line two tab [31m"},
		{"c1\u0085control\x7f", 0, "c1 control"},
		{"bad \xff utf8", 0, "bad ? utf8"},
		{"rtl \u202eevil\u200b\ufffd!", 0, "rtl  evil  !"},
		{"exactly ten", 11, "exactly ten"},
		{"longer than ten", 10, "longer …"},
		{"ééééé", 8, "éé…"}, // never half a rune
	} {
		got := Clean(c.in, c.max)
		if got != c.want {
			t.Errorf("Clean(%q, %d) = %q, want %q", c.in, c.max, got, c.want)
		}
		if c.max > 0 && len(got) > c.max || !utf8.ValidString(got) {
			t.Errorf("Clean(%q, %d) = %q: over the bound or invalid", c.in, c.max, got)
		}
	}
	if got := Cut(strings.Repeat("x", 2000), 500); len(got) != 500 || !strings.HasSuffix(got, "…") {
		t.Errorf("Cut to 500: %d bytes %q…", len(got), got[:10])
	}
}
