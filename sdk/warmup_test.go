package sdk

import (
	"math"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/sdk/limit"
	"github.com/switchyard-io/switchyard/sdk/wire"
)

// TestL4WarmUp turns an L4 switch off on a virtual clock and counts the
// writes the middleware lets through each second: with a 10 s warm_up
// the share follows the linear ramp (within 10 % of each second's mean),
// without one the off is a step.
func TestL4WarmUp(t *testing.T) {
	const perSecond = 1000
	run := func(t *testing.T, warmUp time.Duration) []float64 {
		c := newTestClient(t, Config{})
		clock := limit.NewFakeClock()
		c.clock = clock
		sw := mkSwitch("checkout", "db-readonly", wire.StateOn, 100)
		sw.Level, sw.WarmUp = wire.L4, wire.Duration(warmUp)
		publishLive(t, c, 1, []*wire.Switch{sw})
		h := c.Middleware(MiddlewareOptions{Switches: []*Handle{c.Switch("db-readonly")}})(
			http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) }))
		write := func() int {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/orders", nil))
			return rec.Code
		}
		read := func() int {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/orders", nil))
			return rec.Code
		}
		if code := write(); code != http.StatusServiceUnavailable {
			t.Fatalf("write while on: %d, want 503", code)
		}
		clock.Advance(time.Hour) // the warm-up counts from the off, not the on
		off := *sw
		off.State, off.Version = wire.StateOff, 2
		publishLive(t, c, 2, []*wire.Switch{&off})

		var shares []float64
		for range 12 {
			admitted := 0
			for range perSecond {
				if code := read(); code != http.StatusCreated {
					t.Fatalf("read during warm-up: %d, want the handler's 201", code)
				}
				switch code := write(); code {
				case http.StatusCreated:
					admitted++
				case http.StatusServiceUnavailable:
				default:
					t.Fatalf("write: %d, want 201 or 503 read_only", code)
				}
				clock.Advance(time.Second / perSecond)
			}
			shares = append(shares, float64(admitted)/perSecond)
		}
		if c.warmUntil.Load() != 0 {
			t.Errorf("warm-up still marked in progress after it ended")
		}
		return shares
	}

	t.Run("10s warm-up ramps", func(t *testing.T) {
		shares := run(t, 10*time.Second)
		for s, got := range shares {
			want := min((float64(s)+0.5)/10, 1) // the ramp's mean over second s
			t.Logf("second %2d: admitted %.3f, ramp %.3f", s, got, want)
			if math.Abs(got-want) > 0.1*want {
				t.Errorf("second %d: admitted share %.3f, want %.3f ± 10 %%", s, got, want)
			}
		}
	})
	t.Run("without warm-up the off is a step", func(t *testing.T) {
		for s, got := range run(t, 0) {
			if got != 1 {
				t.Errorf("second %d: admitted share %.3f, want 1 (every write at once)", s, got)
			}
		}
	})
}

// TestL4WarmUpRestartsAndEnds checks the edges: turning the switch back
// on mid-ramp rejects every write again, the next off starts a new ramp,
// and WarmingUp reports the share.
func TestL4WarmUpRestartsAndEnds(t *testing.T) {
	c := newTestClient(t, Config{})
	clock := limit.NewFakeClock()
	c.clock = clock
	sw := mkSwitch("checkout", "ro", wire.StateOn, 100)
	sw.Level, sw.WarmUp = wire.L4, wire.Duration(4*time.Second)
	publishLive(t, c, 1, []*wire.Switch{sw})
	h := c.Switch("ro")
	if _, warming := h.WarmingUp(); warming {
		t.Fatal("warming up while on")
	}
	set := func(rev int64, state string) {
		v := *sw
		v.State, v.Version = state, rev
		publishLive(t, c, rev, []*wire.Switch{&v})
	}
	set(2, wire.StateOff)
	clock.Advance(time.Second)
	if share, warming := h.WarmingUp(); !warming || share != 0.25 {
		t.Fatalf("1s into a 4s warm-up: share %v warming %v, want 0.25 true", share, warming)
	}
	g := c.Guard(h)
	set(3, wire.StateOn)
	for range 100 {
		if _, en := g.Enter(t.Context(), "POST /x", nil, true); en.Verdict != Reject || en.Reason != ReasonReadOnly {
			t.Fatalf("write with the switch on again: %v %q, want reject read_only", en.Verdict, en.Reason)
		}
	}
	clock.Advance(time.Second)
	set(4, wire.StateOff)
	if share, warming := h.WarmingUp(); !warming || share != 0 {
		t.Fatalf("right after the second off: share %v warming %v, want a new ramp from 0", share, warming)
	}
	clock.Advance(4 * time.Second)
	if _, warming := h.WarmingUp(); warming {
		t.Fatal("still warming up after warm_up passed")
	}
	if _, en := g.Enter(t.Context(), "POST /x", nil, true); en.Verdict != Proceed {
		t.Fatalf("write after the warm-up: %v, want proceed", en.Verdict)
	}
}

// TestWarmUpDecodesOnTheFastPath: a published L4 value with warm_up, as
// the console writes it, takes the canonical fast path; a negative one is
// refused.
func TestWarmUpDecodesOnTheFastPath(t *testing.T) {
	v := []byte(`{"app":"checkout","name":"ro","level":"L4","state":"off","rollout":{"percent":100},"warm_up":"2m","version":2}`)
	if sw, ok := parseCanonicalSwitch(v); !ok || sw.WarmUp.D() != 2*time.Minute {
		t.Fatalf("fast path: %+v %v, want warm_up 2m", sw, ok)
	}
	if _, err := decodeSwitch([]byte(`{"app":"checkout","name":"ro","level":"L4","state":"off","rollout":{"percent":100},"warm_up":"-1s","version":2}`)); err == nil {
		t.Fatal("negative warm_up accepted")
	}
}
