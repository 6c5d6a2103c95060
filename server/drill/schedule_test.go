package drill

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/server"
)

// steps drives a schedule the way the drill job does: a step every second
// from from to to (the first at from), each dealing with what dueAt owes,
// and returns the runs started and the cron times recorded missed.
func steps(pl *plan, created, from, to time.Time) (started []time.Time, missed int) {
	last := created
	for now := from; !now.After(to); now = now.Add(time.Second) {
		du := dueAt(pl, last, now)
		if !du.Start.IsZero() {
			started = append(started, du.Start)
		}
		missed += du.MissedCount
		last = du.Last
	}
	return started, missed
}

// TestDailyRunsAtAnyPhase: with the default settings a daily schedule
// runs at its cron time whatever the phase of the job's steps against the
// cron time: 100 random phases, one run each, none missed.
func TestDailyRunsAtAnyPhase(t *testing.T) {
	pl := mustPlan(t, Spec{Schedule: "0 3 * * *", Timezone: "Europe/Berlin"})
	berlin, _ := time.LoadLocation("Europe/Berlin")
	cronAt := time.Date(2030, 6, 12, 3, 0, 0, 0, berlin)
	rng := rand.New(rand.NewPCG(17, 4))
	for range 100 {
		phase := time.Duration(rng.Int64N(int64(time.Second)))
		created := cronAt.Add(-time.Hour)
		from := cronAt.Add(-5*time.Second + phase)
		started, missed := steps(pl, created, from, cronAt.Add(10*time.Second))
		if len(started) != 1 || !started[0].Equal(cronAt) || missed != 0 {
			t.Fatalf("phase %v: started %v, %d missed; want one run at %v", phase, started, missed, cronAt.UTC())
		}
	}
}

// TestDaylightSaving: 02:30 every day in Europe/Berlin. On 2025-03-30 the
// clocks jump from 02:00 to 03:00: the run comes right after the jump, at
// 03:00 CEST (01:00 UTC), once. On 2025-10-26 02:30 happens twice: the
// run comes at the first, 02:30 CEST (00:30 UTC), once. The days around
// run at 02:30 local.
func TestDaylightSaving(t *testing.T) {
	pl := mustPlan(t, Spec{Schedule: "30 2 * * *", Timezone: "Europe/Berlin"})
	utc := func(mo time.Month, d, h, m int) time.Time { return time.Date(2025, mo, d, h, m, 0, 0, time.UTC) }
	for _, tc := range []struct {
		name     string
		from, to time.Time
		want     []time.Time
	}{
		{"spring forward", utc(3, 29, 0, 0), utc(3, 31, 6, 0), []time.Time{utc(3, 29, 1, 30), utc(3, 30, 1, 0), utc(3, 31, 0, 30)}},
		{"fall back", utc(10, 25, 0, 0), utc(10, 27, 6, 0), []time.Time{utc(10, 25, 0, 30), utc(10, 26, 0, 30), utc(10, 27, 1, 30)}},
	} {
		started, missed := steps(pl, tc.from.Add(-time.Minute), tc.from, tc.to)
		if len(started) != len(tc.want) || missed != 0 {
			t.Fatalf("%s: runs %v, %d missed; want %v", tc.name, started, missed, tc.want)
		}
		for i := range started {
			if !started[i].Equal(tc.want[i]) {
				t.Fatalf("%s: runs %v, want %v", tc.name, started, tc.want)
			}
		}
		// The next run the API shows agrees with what the job does.
		if next := pl.next(tc.want[0]); !next.Equal(tc.want[1]) {
			t.Errorf("%s: next after %v is %v, want %v", tc.name, tc.want[0], next, tc.want[1])
		}
	}
	// A time the jump does not skip runs at its own time that day.
	three := mustPlan(t, Spec{Schedule: "0 3 * * *", Timezone: "Europe/Berlin"})
	if next := three.next(utc(3, 29, 12, 0)); !next.Equal(utc(3, 30, 1, 0)) {
		t.Errorf("03:00 on the day of the jump: %v", next)
	}
	// A fixed interval counts real time across the change.
	every := mustPlan(t, Spec{Schedule: "@every 1h", Timezone: "Europe/Berlin", Duration: "1m"})
	if next := every.next(utc(10, 26, 0, 30)); !next.Equal(utc(10, 26, 1, 30)) {
		t.Errorf("@every 1h across the fall back: %v", next)
	}
}

// TestScheduleBounds: a schedule's runs are at least a minute and at least
// the drill's duration apart; the starting deadline is at least two steps
// of the job; each refusal names its field.
func TestScheduleBounds(t *testing.T) {
	for _, tc := range []struct {
		spec  Spec
		field string // "" valid
	}{
		{Spec{Schedule: "* * * * *", Duration: "1m"}, ""},
		{Spec{Schedule: "@every 1m", Duration: "30s"}, ""},
		{Spec{Schedule: "@every 30s", Duration: "10s"}, "schedule"},
		{Spec{Schedule: "@every 1s", Duration: "1s"}, "schedule"},
		{Spec{Schedule: "*/5 * * * *", Duration: "10m"}, "schedule"},
		{Spec{Schedule: "30,40 3 * * *", Duration: "30m"}, "schedule"},
		{Spec{Schedule: "30,40 3 * * *", Duration: "10m"}, ""},
		{Spec{Schedule: "0 3 1 * *", Duration: "1h"}, ""},
		{Spec{Schedule: "0 3 1 * *", Duration: "1m", StartingDeadline: "1s"}, "starting_deadline"},
		{Spec{Schedule: "0 3 1 * *", Duration: "1m", StartingDeadline: "0s"}, "starting_deadline"},
		{Spec{Schedule: "0 3 1 * *", Duration: "1m", StartingDeadline: "2s"}, ""},
	} {
		s := tc.spec
		s.Switch, s.Target.Selector, s.Probes = "recommend", "canary=true", []Probe{{URL: "http://svc/x"}}
		_, err := s.compile()
		var ve *server.ValidationError
		switch {
		case tc.field == "" && err != nil:
			t.Errorf("%s / %s: %v", s.Schedule, s.Duration, err)
		case tc.field != "" && (!errors.As(err, &ve) || len(ve.Fields) != 1 || ve.Fields[0].Field != tc.field):
			t.Errorf("%s / %s / deadline %q: %v, want an error naming %s", s.Schedule, s.Duration, s.StartingDeadline, err, tc.field)
		case tc.field == "schedule" && !strings.Contains(err.Error(), "apart"):
			t.Errorf("%s: %v", s.Schedule, err)
		}
	}
	if pl := mustPlan(t, Spec{Schedule: "0 3 1 * *"}); pl.startingDeadline != DefaultStartingDeadline || DefaultStartingDeadline < 2*time.Second {
		t.Errorf("default starting deadline %v", pl.startingDeadline)
	}
}
