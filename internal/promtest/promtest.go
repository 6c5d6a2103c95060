// Package promtest runs a real Prometheus for tests: the prometheus binary
// on a free loopback port, a private TSDB in the test's temp dir, scraping
// an Exporter whose gauges the test sets. It never uses a system-wide
// Prometheus (nothing here talks to :9090).
//
// Without the binary, tests fail under CI=true and are skipped elsewhere;
// Debian: apt-get install -y prometheus (or set SWITCHYARD_PROMETHEUS to
// the binary's path).
package promtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// ScrapeInterval is how often the test Prometheus scrapes the exporter.
const ScrapeInterval = 500 * time.Millisecond

// startDeadline bounds how long Start waits for readiness and the first
// scrape; generous, because the machines running tests are shared.
const startDeadline = 30 * time.Second

// Server is a Prometheus process owned by one test.
type Server struct {
	// URL is the HTTP API base, http://127.0.0.1:<port>.
	URL string
	// Exporter is the target it scrapes.
	Exporter *Exporter

	tb     testing.TB
	cmd    *exec.Cmd
	exited chan struct{} // closed when the process has been waited for
	log    *lockedBuffer
	client *http.Client // promtest's own requests; idle connections closed on Stop
	once   sync.Once
}

// candidates are where Binary looks when SWITCHYARD_PROMETHEUS is unset.
var candidates = []string{"prometheus", "/usr/bin/prometheus"}

// Binary returns the prometheus binary's path: SWITCHYARD_PROMETHEUS if
// set (it must exist), else prometheus on PATH or Debian's. Without one
// it fails the test under CI=true and skips it otherwise.
func Binary(tb testing.TB) string {
	tb.Helper()
	const install = "apt-get update && apt-get install -y prometheus (or set SWITCHYARD_PROMETHEUS to the binary)"
	if p := os.Getenv("SWITCHYARD_PROMETHEUS"); p != "" {
		path, err := exec.LookPath(p)
		if err != nil {
			tb.Fatalf("promtest: SWITCHYARD_PROMETHEUS=%s: %v", p, err)
		}
		return path
	}
	for _, p := range candidates {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	if os.Getenv("CI") == "true" {
		tb.Fatal("promtest: these tests need the prometheus binary: " + install)
	}
	tb.Skip("promtest: prometheus not installed; skipped outside CI. Install: " + install)
	return ""
}

// Start starts Prometheus scraping a new Exporter and returns once it is
// ready and the first scrape has landed. It is stopped when tb ends.
func Start(tb testing.TB) *Server {
	tb.Helper()
	bin := Binary(tb)
	exp := newExporter(tb)
	dir := tb.TempDir()
	cfg := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfg, []byte(config(exp.Addr())), 0o600); err != nil {
		tb.Fatalf("promtest: %v", err)
	}
	// A port picked free may be taken before Prometheus binds it; then it
	// exits at once and we try another.
	var lastLog string
	for attempt := 0; attempt < 3; attempt++ {
		s := &Server{
			Exporter: exp, tb: tb, exited: make(chan struct{}), log: &lockedBuffer{},
			client: &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()},
		}
		addr := freeAddr(tb)
		s.URL = "http://" + addr
		s.cmd = exec.Command(bin,
			"--config.file="+cfg,
			"--storage.tsdb.path="+filepath.Join(dir, fmt.Sprintf("data%d", attempt)),
			"--web.listen-address="+addr,
			"--log.level=warn",
		)
		s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
		s.cmd.SysProcAttr = sysProcAttr()
		if err := s.cmd.Start(); err != nil {
			tb.Fatalf("promtest: start %s: %v", bin, err)
		}
		go func() { _ = s.cmd.Wait(); close(s.exited) }()
		tb.Cleanup(s.Stop)

		err := s.waitReady()
		if err == nil {
			s.Sync(tb)
			return s
		}
		s.Stop()
		lastLog = s.log.String()
		if !strings.Contains(lastLog, "address already in use") {
			tb.Fatalf("promtest: %v\nprometheus log:\n%s", err, lastLog)
		}
	}
	tb.Fatalf("promtest: no free port after 3 attempts\nprometheus log:\n%s", lastLog)
	return nil
}

func config(target string) string {
	return fmt.Sprintf(`global:
  scrape_interval: %[1]s
  scrape_timeout: %[1]s
  evaluation_interval: 1m
scrape_configs:
  - job_name: promtest
    static_configs:
      - targets: [%[2]q]
`, ScrapeInterval, target)
}

// Stop kills Prometheus and waits for it to exit; clients see connection
// refused from then on. Safe to call more than once.
func (s *Server) Stop() {
	s.once.Do(func() {
		if s.cmd.Process != nil {
			_ = s.cmd.Process.Kill()
			<-s.exited
		}
		s.client.CloseIdleConnections()
	})
}

// Log is what Prometheus has written to stdout and stderr so far.
func (s *Server) Log() string { return s.log.String() }

func (s *Server) waitReady() error {
	deadline := time.Now().Add(startDeadline)
	for {
		select {
		case <-s.exited:
			return fmt.Errorf("prometheus exited before it was ready (%v)", s.cmd.ProcessState)
		default:
		}
		resp, err := s.get("/-/ready")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("prometheus at %s not ready after %s (last: %v)", s.URL, startDeadline, err)
		}
		if !s.pause(50 * time.Millisecond) {
			return fmt.Errorf("prometheus exited before it was ready (%v)", s.cmd.ProcessState)
		}
	}
}

// Sync waits until Prometheus has stored a scrape that began after Sync
// was called, so every Set before it is visible to queries at time.Now().
func (s *Server) Sync(tb testing.TB) {
	tb.Helper()
	want := s.Exporter.scrapes() + 1
	deadline := time.Now().Add(startDeadline)
	var last string
	for {
		seq, err := s.instant(seqMetric)
		if err == nil && seq >= float64(want) {
			return
		}
		last = fmt.Sprintf("%s=%v, err=%v", seqMetric, seq, err)
		if time.Now().After(deadline) {
			tb.Fatalf("promtest: no scrape #%d stored after %s (%s)\nprometheus log:\n%s", want, startDeadline, last, s.Log())
		}
		if !s.pause(ScrapeInterval / 5) {
			tb.Fatalf("promtest: prometheus exited while waiting for a scrape (%v)\nprometheus log:\n%s", s.cmd.ProcessState, s.Log())
		}
	}
}

// pause waits d, or returns false at once if Prometheus has exited.
func (s *Server) pause(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-s.exited:
		return false
	case <-t.C:
		return true
	}
}

// instant evaluates a query that yields one series at the server's now.
func (s *Server) instant(q string) (float64, error) {
	resp, err := s.get("/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var body struct {
		Status string
		Error  string
		Data   struct {
			Result []struct {
				Value [2]any
			}
		}
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&body); err != nil {
		return 0, err
	}
	if body.Status != "success" {
		return 0, errors.New(body.Error)
	}
	if len(body.Data.Result) != 1 {
		return 0, fmt.Errorf("%d series", len(body.Data.Result))
	}
	v, _ := body.Data.Result[0].Value[1].(string)
	return strconv.ParseFloat(v, 64)
}

// Sample is one sample Prometheus stored.
type Sample struct {
	At    time.Time
	Value float64
}

// Samples returns what Prometheus stored for selector, which must match
// one series, in the last 10 minutes, oldest first: the raw data a test
// computes its expectations from.
func (s *Server) Samples(tb testing.TB, selector string) []Sample {
	tb.Helper()
	resp, err := s.get("/api/v1/query?query=" + url.QueryEscape(selector+"[10m]"))
	if err != nil {
		tb.Fatalf("promtest: samples of %s: %v", selector, err)
	}
	defer resp.Body.Close()
	var body struct {
		Status string
		Error  string
		Data   struct {
			Result []struct {
				Values [][2]any
			}
		}
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&body); err != nil {
		tb.Fatalf("promtest: samples of %s: %v", selector, err)
	}
	if body.Status != "success" || len(body.Data.Result) != 1 {
		tb.Fatalf("promtest: samples of %s: status %s, %d series, %s", selector, body.Status, len(body.Data.Result), body.Error)
	}
	var out []Sample
	for _, p := range body.Data.Result[0].Values {
		sec, _ := p[0].(float64)
		str, _ := p[1].(string)
		v, err := strconv.ParseFloat(str, 64)
		if err != nil {
			tb.Fatalf("promtest: samples of %s: value %q: %v", selector, str, err)
		}
		out = append(out, Sample{At: time.UnixMilli(int64(math.Round(sec * 1000))).UTC(), Value: v})
	}
	return out
}

// get is one GET of path with a short timeout, so a wedged process cannot
// stall a wait loop past its deadline.
func (s *Server) get(path string) (*http.Response, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+path, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = cancelOnClose{resp.Body, cancel}
	return resp, nil
}

type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

// freeAddr returns a loopback host:port that was free a moment ago.
func freeAddr(tb testing.TB) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("promtest: %v", err)
	}
	defer l.Close()
	return l.Addr().String()
}

// lockedBuffer collects the process output; exec writes from its own
// goroutines while the test may read.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.b.Len() > 1<<20 { // keep memory bounded; the start of the log explains most failures
		return len(p), nil
	}
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
