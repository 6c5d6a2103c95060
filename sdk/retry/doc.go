// Package retry retries an operation the way a protected dependency can
// survive: exponential backoff with full jitter, a retry budget that caps
// retries at a fraction (10 % by default) of the requests over a sliding
// window, and no retry at all for a limiter rejection (limit.ErrLimited), an
// open breaker (limit.ErrOpen) or a context that is cancelled or past its
// deadline — retrying those only adds load where there is none to spare.
//
// With a circuit breaker, put the breaker around the whole retry loop
// (DoWithBreaker, or breaker.Do(func() error { return retry.Do(…) })): one
// logical call then counts once in the breaker, whatever its attempts, and an
// open breaker stops the call before the first attempt.
//
// Time is injected (Policy.Sleep, and the Budget's limit.Clock) so tests never
// sleep. The package imports the standard library and sdk/limit only; it must
// not import etcd, Prometheus, gin, gorm or the rest of the repository.
package retry
