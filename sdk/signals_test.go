package sdk

import (
	"sync"
	"testing"
)

// TestStripedCounter: concurrent adds all count, and goroutines spread
// over the stripes instead of fighting over one cache line.
func TestStripedCounter(t *testing.T) {
	var c stripedCounter
	const goroutines, adds = 8, 1000
	var wg sync.WaitGroup
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < adds; i++ {
				c.Add(1)
			}
		}()
	}
	wg.Wait()
	if got := c.Load(); got != goroutines*adds {
		t.Fatalf("Load() = %d, want %d", got, goroutines*adds)
	}
	used := 0
	for i := range c.s {
		if c.s[i].n.Load() > 0 {
			used++
		}
	}
	if used < 2 {
		t.Fatalf("%d goroutines used %d of %d stripes", goroutines, used, stripes)
	}
}

// TestStripesOfNeighbours: goroutine stacks start 2 KiB apart; four
// neighbours take at least three stripes (shifting by 8 KiB once put all
// four on one, and parallel degraded answers fought over one line).
func TestStripesOfNeighbours(t *testing.T) {
	for _, base := range []uintptr{0xc000100000, 0x2c553cb2c000, 0x3d121965c000} {
		seen := map[uint64]bool{}
		for i := uintptr(0); i < 4; i++ {
			seen[stripeOf(base+i*2048)] = true
		}
		if len(seen) < 3 {
			t.Errorf("stacks from %#x, 2 KiB apart: %d stripes for four goroutines", base, len(seen))
		}
	}
}
