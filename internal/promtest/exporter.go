package promtest

import (
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// seqMetric is the exporter's own gauge: the sequence number of the scrape
// that carried it. Sync waits for it to pass the count served before.
const seqMetric = "promtest_scrape_seq"

var metricName = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
var labelName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// labelEscaper escapes a label value as the text format wants.
var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

// Exporter is a scrape target whose gauges the test sets. It serves the
// Prometheus text format on a loopback httptest server.
type Exporter struct {
	srv *httptest.Server

	mu     sync.Mutex
	gauges map[string]float64 // key: series line without the value
	served int64              // scrapes answered
}

func newExporter(tb testing.TB) *Exporter {
	tb.Helper()
	e := &Exporter{gauges: map[string]float64{}}
	e.srv = httptest.NewServer(http.HandlerFunc(e.serve))
	tb.Cleanup(e.srv.Close)
	return e
}

// Addr is the exporter's host:port, the scrape target.
func (e *Exporter) Addr() string { return strings.TrimPrefix(e.srv.URL, "http://") }

// Set sets gauge name{labels} to v; labels are name, value pairs. The
// next scrape serves it (Server.Sync waits for that scrape).
func (e *Exporter) Set(name string, v float64, labels ...string) {
	key := series(name, labels)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.gauges[key] = v
}

// Delete stops serving gauge name{labels}.
func (e *Exporter) Delete(name string, labels ...string) {
	key := series(name, labels)
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.gauges, key)
}

// scrapes is the number of scrapes answered so far.
func (e *Exporter) scrapes() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.served
}

func (e *Exporter) serve(w http.ResponseWriter, _ *http.Request) {
	e.mu.Lock()
	e.served++
	lines := make([]string, 0, len(e.gauges)+1)
	for k, v := range e.gauges {
		lines = append(lines, k+" "+formatValue(v))
	}
	lines = append(lines, seqMetric+" "+strconv.FormatInt(e.served, 10))
	e.mu.Unlock()

	sort.Strings(lines) // series of one metric stay together, as the format wants
	var b strings.Builder
	typed := map[string]bool{}
	for _, l := range lines {
		name := l[:strings.IndexAny(l, "{ ")]
		if !typed[name] {
			typed[name] = true
			fmt.Fprintf(&b, "# TYPE %s gauge\n", name)
		}
		b.WriteString(l)
		b.WriteByte('\n')
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_, _ = w.Write([]byte(b.String()))
}

// series renders name{l1="v1",...} with labels sorted; it panics on a
// name the text format cannot carry, which is a bug in the test.
func series(name string, labels []string) string {
	if !metricName.MatchString(name) || name == seqMetric {
		panic(fmt.Sprintf("promtest: bad metric name %q", name))
	}
	if len(labels)%2 != 0 {
		panic(fmt.Sprintf("promtest: labels of %s must be name, value pairs: %q", name, labels))
	}
	if len(labels) == 0 {
		return name
	}
	pairs := make([]string, 0, len(labels)/2)
	for i := 0; i < len(labels); i += 2 {
		if !labelName.MatchString(labels[i]) || strings.HasPrefix(labels[i], "__") {
			panic(fmt.Sprintf("promtest: bad label name %q", labels[i]))
		}
		pairs = append(pairs, labels[i]+`="`+labelEscaper.Replace(labels[i+1])+`"`)
	}
	sort.Strings(pairs)
	return name + "{" + strings.Join(pairs, ",") + "}"
}

func formatValue(v float64) string {
	switch {
	case math.IsNaN(v):
		return "NaN"
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
