package drill

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard-io/switchyard/server/egress"
	"github.com/switchyard-io/switchyard/server/seal"
)

// ProbeRound is one round of a probe's requests and what they showed.
type ProbeRound struct {
	URL      string `json:"url"`
	Method   string `json:"method"`
	Requests int    `json:"requests"`
	// Cut says the round's deadline (or the run's end) stopped it before
	// all the probe's requests were sent.
	Cut bool `json:"cut,omitempty"`
	// Failures are answers with another status, a missing required field,
	// a body that is not JSON (when fields are required) or no answer.
	Failures int            `json:"failures"`
	Statuses map[string]int `json:"statuses"` // "200": 9, "error": 1
	// MissingFields lists the required fields some answer lacked.
	MissingFields []string `json:"missing_fields,omitempty"`
	// P50MS and P99MS are the round's latencies in milliseconds.
	P50MS float64 `json:"p50_ms"`
	P99MS float64 `json:"p99_ms"`
	// SamplesMS are every request's latency, in order.
	SamplesMS []float64 `json:"samples_ms"`
	// FirstFailure is the first failing answer, with an excerpt of its
	// body (egress.Excerpt: at most 1 KiB, control characters removed).
	FirstFailure *ProbeAnswer `json:"first_failure,omitempty"`
}

// ProbeAnswer is one answer of a probe.
type ProbeAnswer struct {
	Status  int      `json:"status,omitempty"`
	Error   string   `json:"error,omitempty"`
	Missing []string `json:"missing,omitempty"`
	Body    string   `json:"body,omitempty"`
}

// readLimit bounds what is read of an answer.
const readLimit = 1 << 20

// prober sends probes through the egress guard: every connection is
// checked where it is dialled, and a redirect is an answer, not followed.
// Header values are stored sealed and opened only here, for the request.
type prober struct {
	client *http.Client
	keys   *seal.Keyring
}

func newProber(g *egress.Guard, keys *seal.Keyring) *prober {
	return &prober{client: g.Client(5*time.Second, true), keys: keys}
}

// round sends the probe's requests one after another and checks each.
func (pr *prober) round(ctx context.Context, p probePlan) ProbeRound {
	out := ProbeRound{URL: p.URL, Method: p.Method, Requests: p.requests, Statuses: map[string]int{}}
	missing := map[string]bool{}
	for i := 0; i < p.requests && ctx.Err() == nil; i++ {
		took, ans := pr.one(ctx, p)
		out.SamplesMS = append(out.SamplesMS, ms(took))
		if ans.Error != "" {
			out.Statuses["error"]++
		} else {
			out.Statuses[strconv.Itoa(ans.Status)]++
		}
		for _, m := range ans.Missing {
			missing[m] = true
		}
		if ans.Error != "" || ans.Status != p.expectStatus || len(ans.Missing) > 0 {
			out.Failures++
			if out.FirstFailure == nil {
				a := ans
				out.FirstFailure = &a
			}
		}
	}
	out.Cut = len(out.SamplesMS) < p.requests
	out.Requests = len(out.SamplesMS)
	for m := range missing {
		out.MissingFields = append(out.MissingFields, m)
	}
	sort.Strings(out.MissingFields)
	out.P50MS, out.P99MS = quantileMS(out.SamplesMS, 0.5), quantileMS(out.SamplesMS, 0.99)
	return out
}

// one sends one request and checks its answer.
func (pr *prober) one(ctx context.Context, p probePlan) (time.Duration, ProbeAnswer) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	var body io.Reader
	if p.Body != "" {
		body = strings.NewReader(p.Body)
	}
	req, err := http.NewRequestWithContext(ctx, p.Method, p.URL, body)
	if err != nil {
		return 0, ProbeAnswer{Error: egress.Reason(err)}
	}
	for k, v := range p.Headers {
		plain, err := pr.keys.Open(v)
		if err != nil {
			return 0, ProbeAnswer{Error: "header " + k + ": " + err.Error()}
		}
		req.Header.Set(k, plain)
	}
	req.Header.Set("User-Agent", "switchyard-drill")
	start := time.Now()
	res, err := pr.client.Do(req)
	if err != nil {
		return time.Since(start), ProbeAnswer{Error: egress.Reason(err)}
	}
	raw, err := io.ReadAll(io.LimitReader(res.Body, readLimit))
	res.Body.Close()
	took := time.Since(start)
	ans := ProbeAnswer{Status: res.StatusCode}
	if err != nil {
		ans.Error = "reading the answer: " + err.Error()
	}
	if len(p.pointers) > 0 {
		var doc any
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(&doc); err != nil {
			ans.Missing = []string{"(the body is not JSON)"}
		} else {
			for _, ptr := range p.pointers {
				if !ptr.Resolve(doc) {
					ans.Missing = append(ans.Missing, ptr.String())
				}
			}
		}
	}
	if ans.Error != "" || ans.Status != p.expectStatus || len(ans.Missing) > 0 {
		ans.Body = egress.Excerpt(raw, egress.MaxExcerpt)
	}
	return took, ans
}

// quantileMS is the q-quantile of samples (nearest rank).
func quantileMS(samples []float64, q float64) float64 {
	if len(samples) == 0 {
		return 0
	}
	s := append([]float64(nil), samples...)
	sort.Float64s(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

// ms is a duration in milliseconds, to the microsecond.
func ms(d time.Duration) float64 { return math.Round(float64(d.Microseconds())) / 1000 }

// statusCounts writes the round's answers by status as the run page
// shows them: "200×19 error×1", in order of status.
func (r ProbeRound) statusCounts() string {
	keys := make([]string, 0, len(r.Statuses))
	for k := range r.Statuses {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		keys[i] = k + "×" + strconv.Itoa(r.Statuses[k])
	}
	return strings.Join(keys, " ")
}

// describe says what a failing round showed, in one line.
func (r ProbeRound) describe() string {
	if r.FirstFailure == nil {
		return fmt.Sprintf("%s %s: %d/%d as expected", r.Method, egress.RedactQuery(r.URL), r.Requests-r.Failures, r.Requests)
	}
	f := r.FirstFailure
	what := fmt.Sprintf("status %d", f.Status)
	switch {
	case f.Error != "":
		what = f.Error
	case len(f.Missing) > 0:
		what += ", missing " + strings.Join(f.Missing, ", ")
	}
	return fmt.Sprintf("%s %s: %d/%d failed (first: %s)", r.Method, egress.RedactQuery(r.URL), r.Failures, r.Requests, what)
}
