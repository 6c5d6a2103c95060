package servertest

import (
	"testing"
	"time"
)

// Eventually polls cond every 10 ms until it holds, and fails t, naming
// what it waited for, when within passes first. Tests wait with it rather
// than sleep: a generous deadline costs nothing on a quick machine and
// keeps a loaded one from failing a correct test.
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for: %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
