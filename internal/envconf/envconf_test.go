package envconf

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestEnv(t *testing.T) {
	vars := map[string]string{"S": "x", "L": " a, b,,c ", "D": "1m", "BAD": "soon", "BAD2": "later"}
	e := New(func(k string) string { return vars[k] })
	s, l, d, keep := "default", []string{"z"}, time.Second, "kept"
	var bad, bad2 time.Duration
	e.String("S", &s)
	e.String("UNSET", &keep)
	e.List("L", &l)
	e.Duration("D", &d)
	e.Duration("BAD", &bad)
	e.Duration("BAD2", &bad2)
	if s != "x" || keep != "kept" || !slices.Equal(l, []string{"a", "b", "c"}) || d != time.Minute {
		t.Fatalf("got %q %q %v %v", s, keep, l, d)
	}
	err := e.Err()
	if err == nil || !strings.Contains(err.Error(), "BAD:") || !strings.Contains(err.Error(), "BAD2:") {
		t.Fatalf("errors of both bad variables expected, got %v", err)
	}
}
