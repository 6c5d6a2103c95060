package console_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/servertest"
	"github.com/switchyard-io/switchyard/sdk/wire"
)

// TestSwitchWarmUp: an L4 switch's warm_up is stored, shown, published to
// the SDKs, audited, merge-patchable (null removes it) and dropped with a
// level change away from L4.
func TestSwitchWarmUp(t *testing.T) {
	e := newEnv(t)
	c := e.start()
	waitLeader(t, c)
	sw := "/api/v1/apps/checkout/switches"
	key := wire.SwitchKey("default", "checkout", "db-readonly")
	published := func(want time.Duration) {
		t.Helper()
		servertest.Eventually(t, 10*time.Second, "etcd value with warm_up "+want.String(), func() bool {
			var v wire.Switch
			return json.Unmarshal([]byte(e.etcdValue(key)), &v) == nil && v.WarmUp.D() == want
		})
	}

	r := mustStatus(t, call(t, c, "POST", sw, adminToken, `{"name":"db-readonly","level":"L4","warm_up":"90s","reason":"ramp writes back"}`), 201)
	if got := r.str("switch", "warm_up"); got != "1m30s" {
		t.Fatalf("warm_up %q, want 1m30s: %s", got, r.Raw)
	}
	published(90 * time.Second)

	mustStatus(t, call(t, c, "PATCH", sw+"/db-readonly", adminToken, `{"warm_up":"5m","reason":"slower ramp"}`), 200)
	published(5 * time.Minute)
	audit := mustStatus(t, call(t, c, "GET", "/api/v1/audit?target=switch/checkout/db-readonly", adminToken, ""), 200)
	if !strings.Contains(audit.Raw, `"warm_up":"1m30s"`) || !strings.Contains(audit.Raw, `"warm_up":"5m"`) {
		t.Fatalf("audit does not show warm_up before and after: %s", audit.Raw)
	}

	r = mustStatus(t, call(t, c, "PATCH", sw+"/db-readonly", adminToken, `{"warm_up":null,"reason":"step is fine"}`), 200)
	if strings.Contains(r.Raw, "warm_up") {
		t.Fatalf("warm_up still shown after null: %s", r.Raw)
	}
	published(0)

	mustStatus(t, call(t, c, "PATCH", sw+"/db-readonly", adminToken, `{"warm_up":"30s","reason":"ramp"}`), 200)
	r = mustStatus(t, call(t, c, "PATCH", sw+"/db-readonly", adminToken, `{"level":"L3","reason":"feature off instead"}`), 200)
	if strings.Contains(r.Raw, "warm_up") {
		t.Fatalf("warm_up kept after the level left L4: %s", r.Raw)
	}
}
