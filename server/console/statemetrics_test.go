package console_test

import (
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/switchyard-io/switchyard/server/finding"
)

// TestStateMetrics: /metrics carries the open findings of every kind and
// the failing webhook deliveries, read from the database at scrape time, so
// a finding opened by any console shows on every console.
func TestStateMetrics(t *testing.T) {
	e := newEnv(t)
	a, b := e.start(), e.start()
	for _, c := range []string{
		`switchyard_findings_open{kind="trigger_locked"} 0`,
		`switchyard_webhook_deliveries_retrying 0`,
		`switchyard_webhook_deliveries_failed_last_hour 0`,
	} {
		if m := mustStatus(t, call(t, b, "GET", "/metrics", "", ""), 200); !strings.Contains(m.Raw, c) {
			t.Errorf("/metrics lacks %s", c)
		}
	}
	err := a.DB.Transaction(func(tx *gorm.DB) error {
		_, err := finding.Open(tx, finding.Spec{Kind: finding.TriggerLocked, Target: "trigger/checkout/cpu", App: "checkout",
			Severity: finding.Warning, Summary: "Trigger cpu locked itself after flapping"}, time.Now())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if m := mustStatus(t, call(t, b, "GET", "/metrics", "", ""), 200); !strings.Contains(m.Raw, `switchyard_findings_open{kind="trigger_locked"} 1`) {
		t.Errorf("the other console's /metrics does not show the locked trigger:\n%s", grepLines(m.Raw, "switchyard_findings_open"))
	}
}

func grepLines(s, prefix string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
