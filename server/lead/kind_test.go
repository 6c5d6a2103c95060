package lead

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
)

// TestErrorKind: failures that differ only in their ids, addresses or
// times are one kind; a different operation or a different cause is
// another.
func TestErrorKind(t *testing.T) {
	dial := func(addr string) error {
		return fmt.Errorf("drill: run 17: grant the override lease: %w", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("refused " + addr)})
	}
	same := [][2]error{
		{dial("10.0.0.1:2379"), dial("10.0.0.2:2379")},
		{fmt.Errorf("run %d finished meanwhile", 4), fmt.Errorf("run %d finished meanwhile", 912)},
		{errors.Join(dial("a"), context.DeadlineExceeded), errors.Join(context.DeadlineExceeded, dial("b"))},
	}
	for _, p := range same {
		if a, b := errorKind(p[0]), errorKind(p[1]); a != b {
			t.Errorf("%q and %q are different kinds: %s, %s", p[0], p[1], a, b)
		}
	}
	differ := [][2]error{
		{dial("a"), fmt.Errorf("drill: run 17: grant the override lease: %w", context.DeadlineExceeded)},
		{fmt.Errorf("drill: read runs: %w", context.Canceled), fmt.Errorf("notify: read runs: %w", context.Canceled)},
		{dial("a"), errors.Join(dial("a"), context.DeadlineExceeded)},
	}
	for _, p := range differ {
		if a, b := errorKind(p[0]), errorKind(p[1]); a == b {
			t.Errorf("%q and %q are one kind: %s", p[0], p[1], a)
		}
	}
}
