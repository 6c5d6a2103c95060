package sdk

import (
	"sync"
	"testing"
)

// TestStripedCounter: concurrent adds all count, and goroutines spread
// over the stripes instead of fighting over one cache line (stacks 2 KiB
// apart used to land on one stripe).
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
