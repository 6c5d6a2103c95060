package promtest

import (
	"fmt"
	"io"
	"math"
	"net"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestExporterFormat(t *testing.T) {
	e := newExporter(t)
	e.Set("b_gauge", 0.25, "zone", "a", "pod", `x"y\z`)
	e.Set("a_gauge", math.NaN())
	e.Set("c_gauge", math.Inf(1))
	e.Set("gone", 1)
	e.Delete("gone")
	resp, err := e.srv.Client().Get(e.srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	want := "# TYPE a_gauge gauge\na_gauge NaN\n" +
		"# TYPE b_gauge gauge\nb_gauge{pod=\"x\\\"y\\\\z\",zone=\"a\"} 0.25\n" +
		"# TYPE c_gauge gauge\nc_gauge +Inf\n" +
		"# TYPE promtest_scrape_seq gauge\npromtest_scrape_seq 1\n"
	if string(b) != want {
		t.Fatalf("exporter served\n%s\nwant\n%s", b, want)
	}
}

func TestStartSyncStop(t *testing.T) {
	p := Start(t)
	p.Exporter.Set("promtest_selftest", 0.5)
	p.Sync(t)
	if v, err := p.instant("promtest_selftest"); err != nil || v != 0.5 {
		t.Fatalf("promtest_selftest = %v, %v; want 0.5", v, err)
	}
	p.Exporter.Set("promtest_selftest", 2)
	p.Sync(t)
	if v, err := p.instant("promtest_selftest"); err != nil || v != 2 {
		t.Fatalf("after Set(2): promtest_selftest = %v, %v; want 2", v, err)
	}

	p.Stop()
	p.Stop() // idempotent
	select {
	case <-p.exited:
	default:
		t.Fatal("Stop returned before the process exited")
	}
	if c, err := net.Dial("tcp", strings.TrimPrefix(p.URL, "http://")); err == nil {
		c.Close()
		t.Fatalf("%s still accepts connections after Stop", p.URL)
	}
}

// outcome records how Binary ended a test: Fatal and Skip stop the
// goroutine, as they do in a real test.
type outcome struct {
	testing.TB
	failed, skipped string
}

func (o *outcome) Helper()           {}
func (o *outcome) Fatal(args ...any) { o.failed = fmt.Sprint(args...); runtime.Goexit() }
func (o *outcome) Fatalf(format string, args ...any) {
	o.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (o *outcome) Skip(args ...any) { o.skipped = fmt.Sprint(args...); runtime.Goexit() }

func binaryOutcome(t *testing.T) (path string, o *outcome) {
	o = &outcome{TB: t}
	done := make(chan struct{})
	go func() { defer close(done); path = Binary(o) }()
	<-done
	return path, o
}

func TestBinaryMissing(t *testing.T) {
	saved := candidates
	t.Cleanup(func() { candidates = saved })
	candidates = []string{filepath.Join(t.TempDir(), "no-prometheus")}
	t.Setenv("SWITCHYARD_PROMETHEUS", "")

	t.Setenv("CI", "true")
	if _, o := binaryOutcome(t); !strings.Contains(o.failed, "apt-get install -y prometheus") || o.skipped != "" {
		t.Errorf("under CI=true: failed=%q skipped=%q; want a failure naming the install command", o.failed, o.skipped)
	}
	t.Setenv("CI", "")
	if _, o := binaryOutcome(t); !strings.Contains(o.skipped, "apt-get install -y prometheus") || o.failed != "" {
		t.Errorf("outside CI: failed=%q skipped=%q; want a skip naming the install command", o.failed, o.skipped)
	}
	t.Setenv("SWITCHYARD_PROMETHEUS", filepath.Join(t.TempDir(), "wrong"))
	if _, o := binaryOutcome(t); !strings.Contains(o.failed, "SWITCHYARD_PROMETHEUS") {
		t.Errorf("a wrong SWITCHYARD_PROMETHEUS: failed=%q skipped=%q; want a failure naming it", o.failed, o.skipped)
	}
}
