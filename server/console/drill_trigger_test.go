package console_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/server/console"
	"github.com/switchyard-io/switchyard/server/drill"
)

// TestDrillHoldsTriggers: a drill of recommend degrades the app's fleet
// signals on purpose while a rule watching degraded_rate of recommend
// would turn reviews on. The rule holds its evaluation while the drill
// runs ("held: drill …#1 running", audited trigger.hold), reviews is never
// changed, and the drill's report lists the rule it held. Afterwards the
// rule evaluates again, from the switch as it is.
func TestDrillHoldsTriggers(t *testing.T) {
	e := newEnv(t)
	c := e.start(steadyLeader, func(cfg *console.Config) { cfg.TriggerInterval = 250 * time.Millisecond })
	waitLeader(t, c)
	const app = "held"
	dt := startDrillTarget(t, e, app, svcCorrect, 2)
	seedDrill(t, c, app, dt.urls[0], "")
	waitInstances(t, c, app, 2)
	mustStatus(t, call(t, c, "POST", "/api/v1/apps/"+app+"/switches", adminToken, `{"name":"reviews","level":"L3","reason":"seed"}`), 201)
	mustStatus(t, call(t, c, "POST", "/api/v1/apps/"+app+"/triggers", adminToken,
		`{"name":"guard","switch":"reviews","source":"fleet","query":"degraded_rate{switch=\"recommend\"}",`+
			`"trigger":{"op":">","threshold":0.5},"recover":{"op":"<","threshold":0.1},"reason":"shed reviews when recommend degrades"}`), 201)

	mustStatus(t, call(t, c, "POST", "/api/v1/apps/"+app+"/drills/reco/runs", adminToken, `{"reason":"monthly drill"}`), 202)
	run := waitRun(t, c, app, 1, 60*time.Second)
	if run.Outcome != drill.OutcomePassed {
		t.Fatalf("the drill: %s (%s)", run.Outcome, run.Summary)
	}
	if !slices.Contains(run.Progress.HeldRules, app+"/guard") {
		t.Fatalf("the report lists held rules %v, want %s/guard", run.Progress.HeldRules, app)
	}
	r := mustStatus(t, call(t, c, "GET", "/api/v1/apps/"+app+"/drills/reco/runs/1/report.md", adminToken, ""), 200)
	if !strings.Contains(r.Raw, "Auto-triggers held while it ran: `"+app+"/guard`") {
		t.Fatalf("the Markdown report does not list the held rule:\n%s", r.Raw)
	}
	held := fmt.Sprintf("held: drill %s/reco#1 running", app)
	r = mustStatus(t, call(t, c, "GET", "/api/v1/apps/"+app+"/triggers/guard/evaluations?limit=300", adminToken, ""), 200)
	if !strings.Contains(r.Raw, held) {
		t.Fatalf("no evaluation says %q: %s", held, r.Raw)
	}
	evs, _, err := c.Service.ListAudit(t.Context(), audit.Filter{Target: "trigger/" + app + "/guard", Action: audit.TriggerHold})
	if err != nil || len(evs) != 1 || !strings.HasPrefix(evs[0].Reason, held) || evs[0].ActorKind != audit.ActorTrigger {
		t.Fatalf("trigger.hold events: %+v, %v", evs, err)
	}
	sw := mustStatus(t, call(t, c, "GET", "/api/v1/apps/"+app+"/switches/reviews", adminToken, ""), 200)
	if sw.str("switch", "state") != "off" || sw.num("switch", "version") != 1 {
		t.Fatalf("the drill set off the rule: reviews is %s (v%v)", sw.str("switch", "state"), sw.num("switch", "version"))
	}
}
