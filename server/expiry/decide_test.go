package expiry

import (
	"strings"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/server"
)

// TestDecide is the expiry decision as a table: (switch, progress, now) →
// (progress, action).
func TestDecide(t *testing.T) {
	cfg := Config{RemindBefore: 24 * time.Hour, EscalateAfter: 4 * time.Hour}
	exp := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { t := exp.Add(d); return &t }
	on := func(policy string, maxOn time.Duration) *Switch {
		return &Switch{On: true, Policy: policy, MaxOn: maxOn, ExpiresAt: &exp}
	}
	remind, autoOff := on(server.ExpiryRemind, 72*time.Hour), on(server.ExpiryAutoOff, 72*time.Hour)
	tracked := func(mod func(*State)) *State { s := &State{ExpiresAt: exp}; mod(s); return s }
	for _, tc := range []struct {
		name    string
		sw      *Switch
		st      *State
		now     time.Duration // relative to exp
		cfg     *Config
		want    Action
		resolve string // in want.Resolve
		keep    func(*State) bool
	}{
		{name: "deleted, nothing tracked", now: 0},
		{name: "deleted while tracked", st: tracked(func(s *State) { s.ExpiredAt = at(0) }), resolve: "deleted"},
		{name: "off while tracked", sw: &Switch{}, st: tracked(func(s *State) { s.RemindedAt = at(-time.Hour) }), resolve: "off"},
		{name: "two days before", sw: remind, now: -48 * time.Hour},
		{name: "reminder a day ahead", sw: remind, now: -23 * time.Hour, want: Action{Remind: true},
			keep: func(s *State) bool { return s.RemindedAt != nil && s.RemindedAt.Equal(exp.Add(-23*time.Hour)) }},
		{name: "reminded once", sw: remind, st: tracked(func(s *State) { s.RemindedAt = at(-23 * time.Hour) }), now: -time.Hour},
		{name: "short max_on: half of it ahead, not yet", sw: on(server.ExpiryRemind, time.Hour), now: -40 * time.Minute},
		{name: "short max_on: half of it ahead", sw: on(server.ExpiryRemind, time.Hour), now: -30 * time.Minute, want: Action{Remind: true}},
		{name: "remind policy at expiry", sw: remind, st: tracked(func(s *State) { s.RemindedAt = at(-23 * time.Hour) }), now: 0, want: Action{Expire: true},
			keep: func(s *State) bool { return s.ExpiredAt != nil && s.ExpiredAt.Equal(exp) && s.RemindedAt != nil }},
		{name: "expired without a reminder first", sw: remind, now: time.Hour, want: Action{Expire: true}},
		{name: "not yet escalated", sw: remind, st: tracked(func(s *State) { s.ExpiredAt = at(0) }), now: 4*time.Hour - time.Minute},
		{name: "escalated after EscalateAfter", sw: remind, st: tracked(func(s *State) { s.ExpiredAt = at(0) }), now: 4 * time.Hour, want: Action{Escalate: true},
			keep: func(s *State) bool { return s.EscalatedAt != nil }},
		{name: "escalated once", sw: remind, st: tracked(func(s *State) { s.ExpiredAt, s.EscalatedAt = at(0), at(4*time.Hour) }), now: 10 * time.Hour},
		{name: "no escalation when off", sw: remind, st: tracked(func(s *State) { s.ExpiredAt = at(0) }), now: 100 * time.Hour, cfg: &Config{RemindBefore: time.Hour}},
		{name: "no reminder when off", sw: remind, now: -time.Minute, cfg: &Config{EscalateAfter: time.Hour}},
		{name: "auto_off reminded too", sw: autoOff, now: -time.Hour, want: Action{Remind: true}},
		{name: "auto_off at expiry", sw: autoOff, st: tracked(func(s *State) { s.RemindedAt = at(-time.Hour) }), now: 0, want: Action{TurnOff: true}},
		{name: "auto_off long past expiry", sw: autoOff, now: 30 * 24 * time.Hour, want: Action{TurnOff: true}},
		{name: "renewed: the old expiry's findings go", sw: remind, st: &State{ExpiresAt: exp.Add(-72 * time.Hour), ExpiredAt: at(-72 * time.Hour)}, now: -48 * time.Hour,
			resolve: "expiry moved to 2026-12-01T12:00:00Z", keep: func(s *State) bool { return s.empty() && s.ExpiresAt.Equal(exp) }},
		{name: "renewed into the reminder window", sw: remind, st: &State{ExpiresAt: exp.Add(-time.Hour), ExpiredAt: at(-time.Hour)}, now: -12 * time.Hour,
			want: Action{Remind: true}, resolve: "expiry moved"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cfg
			if tc.cfg != nil {
				c = *tc.cfg
			}
			next, act := Decide(tc.sw, tc.st, exp.Add(tc.now), c)
			got := act
			got.Resolve = ""
			if got != tc.want {
				t.Errorf("action %+v, want %+v", act, tc.want)
			}
			if (tc.resolve == "") != (act.Resolve == "") || !strings.Contains(act.Resolve, tc.resolve) {
				t.Errorf("resolve %q, want %q", act.Resolve, tc.resolve)
			}
			if tc.keep != nil && (next == nil || !tc.keep(next)) {
				t.Errorf("progress %+v", next)
			}
			if (tc.sw == nil || !tc.sw.On || act.TurnOff) && next != nil {
				t.Errorf("progress %+v kept for a switch that is (to be) off", next)
			}
		})
	}
}

// TestBanner: the switch page's line says how long the switch has been on
// and what to do.
func TestBanner(t *testing.T) {
	for _, tc := range []struct {
		st   Status
		want string
	}{
		{Status{On: true, OnFor: "30 days", Expired: true}, "on for 30 days — confirm or turn off"},
		{Status{On: true, OnFor: "2d 1h", Soon: true, Left: "23h 0m", Policy: server.ExpiryRemind}, "on for 2d 1h — expires in 23h 0m: confirm or turn off"},
		{Status{On: true, OnFor: "2d 1h", Soon: true, Left: "1h 0m", Policy: server.ExpiryAutoOff}, "on for 2d 1h — turns off by itself in 1h 0m unless renewed"},
		{Status{On: true, OnFor: "1h 0m"}, ""},
		{Status{}, ""},
	} {
		if got := tc.st.Banner(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.st, got, tc.want)
		}
	}
	if got := OnFor(30 * 24 * time.Hour); got != "30 days" {
		t.Errorf("OnFor(30d) = %q", got)
	}
}
