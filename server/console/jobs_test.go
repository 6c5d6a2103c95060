package console_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/audit"
	"github.com/switchyard-io/switchyard/internal/servertest"
	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/console"
	"github.com/switchyard-io/switchyard/server/lead"
)

// childJobEnv gives a child console the steps job ("hold": its third step
// blocks inside its transaction).
const childJobEnv = "SWITCHYARD_TEST_CHILD_JOB"

// stepsJob is a leader job of four steps on switch checkout/plan — on,
// off, on, off — each one fenced transaction that changes the switch
// through the audited change path and records the step in the job's
// durable state. With hold, step 3 blocks after its change, before its
// commit, and prints HOLD: the moment a leader dies mid-job.
type stepsJob struct {
	svc  *server.Service
	hold bool
}

const planSteps = 4

func (j *stepsJob) Name() string         { return "steps" }
func (j *stepsJob) Every() time.Duration { return 100 * time.Millisecond }
func (j *stepsJob) Step(ctx context.Context, t server.Term, _ time.Time) error {
	_, err := j.svc.InTerm(ctx, t, func(tx *server.JobTx) error {
		var st struct{ Step int }
		if _, err := tx.LoadState("steps", &st); err != nil || st.Step >= planSteps {
			return err
		}
		a := server.JobActor(audit.ActorRollout, "rollout/checkout/plan#1")
		toggle := server.Toggle{Reason: fmt.Sprintf("step %d of the plan", st.Step+1)}
		var err error
		if st.Step%2 == 0 {
			_, err = tx.TurnOn(a, "checkout", "plan", toggle)
		} else {
			_, err = tx.TurnOff(a, "checkout", "plan", toggle)
		}
		if err != nil {
			return err
		}
		if j.hold && st.Step == 2 {
			fmt.Println("HOLD")
			<-ctx.Done() // until the process is killed
			return ctx.Err()
		}
		st.Step++
		return tx.SaveState("steps", st)
	})
	return err
}

// TestLeaderKilledMidJob: the leader (a child process) is SIGKILLed in
// the middle of a job's step, its transaction open; the surviving console
// takes over, resumes from the stored state and finishes the job, and no
// step is applied twice: the audit log has each step once.
func TestLeaderKilledMidJob(t *testing.T) {
	e := newEnv(t)
	boot := e.start(func(c *console.Config) { c.ConsoleID = "boot" })
	mustStatus(t, call(t, boot, "POST", "/api/v1/apps/checkout/switches", adminToken, `{"name":"plan","level":"L3","reason":"seed"}`), 201)
	stop(boot)

	dying := e.startProcess("dying", childJobEnv+"=hold")
	servertest.Eventually(t, 15*time.Second, "the process leads", func() bool { return electionLeader(e) == "dying" })
	survivor := e.startWith([]console.Option{console.WithJob(func(c *console.Console) lead.Job {
		return &stepsJob{svc: c.Service}
	})}, func(c *console.Config) { c.ConsoleID = "survivor" })
	dying.waitLine(t, "HOLD", 15*time.Second)
	died := dying.kill(t)

	events := func() []audit.Event {
		evs, _, err := survivor.Service.ListAudit(context.Background(), audit.Filter{Target: "switch/checkout/plan", Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		return evs
	}
	servertest.Eventually(t, 20*time.Second, "the survivor finishes the job", func() bool { return len(events()) == 1+planSteps })
	t.Logf("the job finished %v after its leader died mid-step", time.Since(died).Round(time.Millisecond))
	seen := map[string]int{}
	for _, ev := range events() {
		if ev.ActorKind == audit.ActorRollout {
			if ev.Cause != "rollout/checkout/plan#1" {
				t.Errorf("event %d: cause %q", ev.ID, ev.Cause)
			}
			seen[ev.Reason]++
		}
	}
	for i := 1; i <= planSteps; i++ {
		if n := seen[fmt.Sprintf("step %d of the plan", i)]; n != 1 {
			t.Errorf("step %d applied %d times: %v", i, n, seen)
		}
	}
	sw, err := survivor.Service.GetSwitch(context.Background(), "checkout", "plan")
	if err != nil || sw.State != "off" || !strings.HasPrefix(sw.UpdatedBy, "rollout") {
		t.Fatalf("switch after the job: %+v %v", sw, err)
	}
	if res, err := survivor.Service.VerifyAudit(context.Background()); err != nil || !res.OK() {
		t.Fatalf("audit chain: %+v %v", res, err)
	}
}
