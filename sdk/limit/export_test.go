package limit

// SetClockForTest sets the clock a Concurrency's queue reads.
func SetClockForTest(c *Concurrency, clock Clock) { c.g.clock = clock }
