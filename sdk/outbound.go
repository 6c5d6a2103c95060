package sdk

import (
	"net/http"
)

// RoundTripper guards outbound HTTP calls with the limit rule of resource
// (typically a throttle rule naming the dependency, "payments-api"):
//
//   - a call the rule refuses is not sent; RoundTrip returns a
//     *RejectError (reason throttled for a throttle rule), which sdk/retry
//     does not retry;
//   - the request carries the caller's criticality (WithCriticality, or
//     the one an inbound guard read) in CriticalityHeader, unless it set
//     one itself;
//   - the outcome reported to the rule is a transport error, or an answer
//     429 or 5xx, as refused; any other answer counts as accepted.
//
// next nil means http.DefaultTransport. With no rule published for
// resource a call costs one atomic load. The request is cloned only to add
// the header.
func (c *Client) RoundTripper(resource string, next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return &guardedTransport{l: c.Limiter(resource), next: next}
}

type guardedTransport struct {
	l    *Limiter
	next http.RoundTripper
}

func (t *guardedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	ctx := r.Context()
	if cr, ok := CriticalityFrom(ctx); ok && r.Header.Get(CriticalityHeader) == "" {
		r = r.Clone(ctx)
		r.Header.Set(CriticalityHeader, cr.String())
	}
	p, err := t.l.Acquire(ctx)
	if err != nil {
		if r.Body != nil {
			_ = r.Body.Close() // RoundTrip must close the body, even on error
		}
		return nil, err
	}
	resp, err := t.next.RoundTrip(r)
	p.Finish(err == nil && resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode < 500)
	return resp, err
}
