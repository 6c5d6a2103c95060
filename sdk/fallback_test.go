package sdk

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchyard-io/switchyard/sdk/wire"
)

func TestFallbackChainOffline(t *testing.T) {
	t.Setenv(EnvVar("checkout", "new-flow.v2"), "on")
	t.Setenv("SWITCHYARD_SWITCH_CHECKOUT_REVIEWS", "off")
	t.Setenv("SWITCHYARD_SWITCH_OTHERAPP_X", "on")
	reg := prometheus.NewRegistry()
	c := newTestClient(t, Config{App: "checkout", Registerer: reg})
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		opts   []Option
		want   bool
		source Source
	}{
		{"new-flow.v2", nil, true, SourceEnv},
		{"new-flow.v2", []Option{Default(false)}, true, SourceEnv},
		{"reviews", []Option{Default(true)}, false, SourceEnv},
		{"x", nil, false, SourceNone},
		{"x", []Option{Default(true)}, true, SourceDefault},
		{"unknown", nil, false, SourceNone},
	} {
		h := c.Switch(tc.name, tc.opts...)
		if got := h.On(ctx); got != tc.want || h.Source() != tc.source {
			t.Errorf("%s %d opts: On = %v from %v, want %v from %v", tc.name, len(tc.opts), got, h.Source(), tc.want, tc.source)
		}
	}
	if !c.On(ctx, "new-flow.v2") || c.On(ctx, "reviews") || c.On(ctx, "nope") {
		t.Error("Client.On does not follow the environment")
	}
	if !c.Stale() || c.Ready() {
		t.Error("an offline client is stale and never ready")
	}
	if got := metricValue(t, reg, "switchyard_sdk_fallbacks_served_total", ""); got != 9 {
		t.Errorf("fallbacks served = %v, want 9", got)
	}
	if got := EnvVar("check-out", "a.b-c"); got != "SWITCHYARD_SWITCH_CHECK_OUT_A_B_C" {
		t.Errorf("EnvVar = %s", got)
	}
}

// metricValue returns the value of the first series of a metric whose
// labels include label (name=value), or any series when label is "".
func metricValue(t *testing.T, reg *prometheus.Registry, name, label string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			match := label == ""
			for _, lp := range m.GetLabel() {
				if lp.GetName()+"="+lp.GetValue() == label {
					match = true
				}
			}
			if !match {
				continue
			}
			if m.Counter != nil {
				return m.Counter.GetValue()
			}
			return m.Gauge.GetValue()
		}
	}
	t.Fatalf("metric %s{%s} not found", name, label)
	return 0
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "app is required"},
		{Config{App: "Checkout"}, "app"},
		{Config{App: "_global"}, "app"},
		{Config{App: "ok", Namespace: "a b"}, "namespace"},
		{Config{App: "ok", Endpoints: []string{""}}, "endpoints"},
		{Config{App: "ok", LeaseTTL: 1}, "lease_ttl"},
	} {
		err := tc.cfg.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%+v) = %v, want error naming %q", tc.cfg, err, tc.want)
		}
		if _, err := New(context.Background(), tc.cfg); err == nil {
			t.Errorf("New(%+v) succeeded", tc.cfg)
		}
	}
	c := Config{App: "ok"}.withDefaults()
	if c.Namespace != "default" || c.InstanceID == "" || c.DialTimeout != DefaultDialTimeout || c.LeaseTTL != DefaultLeaseTTL {
		t.Errorf("defaults = %+v", c)
	}
}

func TestMetricsSharedRegisterer(t *testing.T) {
	reg := prometheus.NewRegistry()
	a := newTestClient(t, Config{App: "checkout", InstanceID: "a", Registerer: reg})
	newTestClient(t, Config{App: "checkout", InstanceID: "b", Registerer: reg})
	if _, err := New(context.Background(), Config{Namespace: "test", App: "checkout", InstanceID: "a", Registerer: reg, Logger: discard}); err == nil {
		t.Error("a duplicate (namespace, app, instance) on one registerer must fail, not panic")
	}
	a.apply([]kvUpdate{{key: wire.SwitchKey("test", "checkout", "x"), value: []byte(mustJSON(t, mkSwitch("checkout", "x", wire.StateOn, 100))), modRev: 7}}, true, 7, SourceLive)
	a.Close()
	if c, err := New(context.Background(), Config{Namespace: "test", App: "checkout", InstanceID: "a", Registerer: reg, Logger: discard}); err != nil {
		t.Errorf("re-registering after Close: %v", err)
	} else {
		c.Close()
	}
	names := map[string]bool{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		names[mf.GetName()] = true
	}
	for _, n := range []string{"switchyard_sdk_applied_revision", "switchyard_sdk_watch_connected",
		"switchyard_sdk_update_errors_total", "switchyard_sdk_fallbacks_served_total", "switchyard_sdk_stale"} {
		if !names[n] {
			t.Errorf("metric %s missing (have %v)", n, names)
		}
	}
}

func TestContextHelpers(t *testing.T) {
	ctx := context.Background()
	if DegradedLevel(ctx) != "" {
		t.Error("plain context is degraded")
	}
	ctx = WithDegraded(WithKey(ctx, "tenant-1"), wire.L4)
	if DegradedLevel(ctx) != wire.L4 {
		t.Error("WithDegraded lost")
	}
	if k, ok := KeyFrom(ctx); !ok || k != "tenant-1" {
		t.Error("WithKey lost")
	}
}

// TestImportBoundaries keeps the SDK free of console dependencies.
func TestImportBoundaries(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, bad := range []string{
			"github.com/gin-gonic/", "gorm.io/",
			"github.com/switchyard-io/switchyard/server", "github.com/switchyard-io/switchyard/audit",
			"github.com/switchyard-io/switchyard/web", "github.com/switchyard-io/switchyard/cmd",
		} {
			if strings.HasPrefix(dep, bad) {
				t.Errorf("sdk depends on %s", dep)
			}
		}
	}
	if _, err := os.Stat("doc.go"); err != nil {
		t.Error("sdk/doc.go missing")
	}
}

// TestHandleOnInlines guards the hot path: Handle.On must stay within the
// compiler's inlining budget (see statePtr), or a check costs a call.
func TestHandleOnInlines(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the compiler")
	}
	out, err := exec.Command("go", "build", "-gcflags=-m", "-o", os.DevNull, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if !regexp.MustCompile(`can inline \(\*Handle\)\.On\b`).Match(out) {
		t.Error("(*Handle).On is no longer inlinable; keep its fast path within the inlining budget")
	}
}
