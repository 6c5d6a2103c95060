package limit

import (
	"sync"
	"testing"
	"time"
)

// TestStripedRollingCountsEveryAdd: striped counters sum to exactly what
// was added, also when goroutines add in parallel, and a recycled bucket
// forgets every stripe.
func TestStripedRollingCountsEveryAdd(t *testing.T) {
	for _, stripes := range []int{1, 3, 4} {
		r := NewStripedRolling(time.Second, 10, stripes)
		if r.stripes&(r.stripes-1) != 0 || r.stripes < stripes {
			t.Fatalf("stripes %d rounded to %d", stripes, r.stripes)
		}
		now := int64(5 * time.Second)
		var wg sync.WaitGroup
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 1000; i++ {
					r.Add3(now, 1, int64(i%2), 0)
				}
			}()
		}
		wg.Wait()
		if s := r.Sum(now); s != [3]int64{8000, 4000, 0} {
			t.Fatalf("stripes %d: sum %v", stripes, s)
		}
		// Ten seconds later the ring came round to the same bucket: old
		// counts are gone from every stripe.
		later := now + int64(10*time.Second)
		r.Add(later, 2, 1)
		if s := r.Sum(later); s != [3]int64{0, 0, 1} {
			t.Fatalf("stripes %d: after recycling %v", stripes, s)
		}
		r.Reset()
		if s := r.Sum(later); s != [3]int64{} {
			t.Fatalf("stripes %d: after reset %v", stripes, s)
		}
	}
}
