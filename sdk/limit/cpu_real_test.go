package limit_test

import (
	"testing"

	"github.com/switchyard-io/switchyard/sdk/limit"
)

// TestCgroupCPUReadsThisMachine: the counter of the machine the tests run
// on reads, and moves forward.
func TestCgroupCPUReadsThisMachine(t *testing.T) {
	read := limit.CgroupCPU()
	b1, t1, err := read()
	if err != nil {
		t.Fatal(err)
	}
	x := 0
	for i := range 10_000_000 { // burn a little CPU
		x += i
	}
	_ = x
	b2, t2, err := read()
	if err != nil {
		t.Fatal(err)
	}
	if b2 < b1 || t2 <= t1 {
		t.Fatalf("counter went (%v, %v) → (%v, %v), want both forward", b1, t1, b2, t2)
	}
}
