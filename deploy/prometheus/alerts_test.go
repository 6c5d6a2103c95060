// Package prometheus holds the alerting rules shipped for Switchyard
// (alerts.yml) and their promtool unit tests (alerts_test.yml).
package prometheus_test

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// promtool returns the promtool binary (PATH or Debian's); without it the
// test fails under CI=true and is skipped elsewhere.
func promtool(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"promtool", "/usr/bin/promtool"} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	const install = "apt-get install -y prometheus (it ships promtool)"
	if os.Getenv("CI") == "true" {
		t.Fatal("promtool is required under CI: " + install)
	}
	t.Skip("promtool not installed; skipped outside CI. Install: " + install)
	return ""
}

// TestPromtool: the rules load (check rules) and every unit test in
// alerts_test.yml passes (test rules).
func TestPromtool(t *testing.T) {
	bin := promtool(t)
	for _, args := range [][]string{{"check", "rules", "alerts.yml"}, {"test", "rules", "alerts_test.yml"}} {
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

type rules struct {
	Groups []struct {
		Rules []struct {
			Alert       string            `json:"alert"`
			Expr        string            `json:"expr"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

type unitTests struct {
	Tests []struct {
		AlertRuleTest []struct {
			Alertname string `json:"alertname"`
			ExpAlerts []any  `json:"exp_alerts"`
		} `json:"alert_rule_test"`
	} `json:"tests"`
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// TestAlertsShape: every alert has a runbook section in runbooks/alerts.md,
// a unit test where it fires and one where it does not, and queries only
// metrics the console, the SDK or the agent export.
func TestAlertsShape(t *testing.T) {
	var r rules
	readYAML(t, "alerts.yml", &r)
	var u unitTests
	readYAML(t, "alerts_test.yml", &u)
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range u.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
	}
	runbook, err := os.ReadFile("../../runbooks/alerts.md")
	if err != nil {
		t.Fatal(err)
	}
	exported := exportedMetrics(t)
	metric := regexp.MustCompile(`switchyard_[a-z_]+`)
	n := 0
	for _, g := range r.Groups {
		for _, rule := range g.Rules {
			n++
			name := rule.Alert
			if want := "runbooks/alerts.md#" + strings.ToLower(name); rule.Annotations["runbook_url"] != want {
				t.Errorf("%s: runbook_url %q, want %q", name, rule.Annotations["runbook_url"], want)
			}
			if !strings.Contains(string(runbook), "\n## "+name+"\n") {
				t.Errorf("%s: no section in runbooks/alerts.md", name)
			}
			if !fires[name] || !quiet[name] {
				t.Errorf("%s: unit tests where it fires %v, where it does not %v; want both", name, fires[name], quiet[name])
			}
			for _, m := range metric.FindAllString(rule.Expr, -1) {
				if base := strings.TrimSuffix(m, "_bucket"); !exported[base] {
					t.Errorf("%s queries %s, which no Go source exports", name, m)
				}
			}
		}
	}
	if n < 10 {
		t.Errorf("%d alerts, want the 10 of the issue", n)
	}
}

// exportedMetrics collects the switchyard_* names in the non-test Go
// sources of the console, the SDK and the agent. The SDK builds its names
// from a prefix ("switchyard_sdk_" + name), so its short names count too.
func exportedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	full := regexp.MustCompile(`"(switchyard_[a-z_]+)"`)
	sdkShort := regexp.MustCompile(`d\("([a-z_]+)", "`)
	for _, dir := range []string{"../../server", "../../sdk", "../../internal"} {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range full.FindAllStringSubmatch(string(src), -1) {
				out[m[1]] = true
			}
			if strings.HasSuffix(path, "sdk/metrics.go") {
				for _, m := range sdkShort.FindAllStringSubmatch(string(src), -1) {
					out["switchyard_sdk_"+m[1]] = true
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}
