package fleet_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/etcdtest"
	"github.com/switchyard-io/switchyard/internal/servertest"
	"github.com/switchyard-io/switchyard/sdk"
	"github.com/switchyard-io/switchyard/sdk/wire"
	"github.com/switchyard-io/switchyard/server/fleet"
)

// fleetClient is one SDK instance of the test fleet and what it did.
type fleetClient struct {
	id       string
	c        *sdk.Client
	h        *sdk.Handle
	serve    http.Handler
	degraded atomic.Uint64 // degraded answers it gave, as its own code saw them
}

// TestSDKFleet runs 20 SDK clients on one embedded etcd, each serving
// requests through the SDK's net/http middleware, and a fleet model fed
// from the same etcd. A switch flips on for 50 % of the instances
// (instance stickiness): the model's applied-by reads 20/20, the instances
// it sees answering degraded are exactly the ones whose own code got the
// degraded level, and once traffic stops its per-instance degraded
// counters equal what each client counted.
func TestSDKFleet(t *testing.T) {
	const ns, app, name, n, interval = "e2e", "checkout", "reco", 20, time.Second
	srv := etcdtest.Start(t)
	cli := srv.Client(t)
	ctx := context.Background()
	publish := func(sw wire.Switch) int64 {
		t.Helper()
		b, _ := json.Marshal(sw)
		resp, err := cli.Put(ctx, wire.SwitchKey(ns, app, name), string(b))
		if err != nil {
			t.Fatal(err)
		}
		return resp.Header.Revision
	}
	sw := wire.Switch{App: app, Name: name, Level: wire.L3, State: wire.StateOff, Version: 1,
		Rollout: wire.Rollout{Percent: 50, Stickiness: wire.StickyInstance}}
	publish(sw)

	m := fleet.New(fleet.Config{Namespace: ns})
	runCtx, stopModel := context.WithCancel(ctx)
	modelDone := make(chan struct{})
	go func() { defer close(modelDone); m.Run(runCtx, cli) }()
	t.Cleanup(func() { stopModel(); <-modelDone })

	clients := make([]*fleetClient, n)
	for i := range clients {
		fc := &fleetClient{id: fmt.Sprintf("inst-%02d", i)}
		c, err := sdk.New(ctx, sdk.Config{Endpoints: []string{srv.Endpoint}, Namespace: ns, App: app,
			InstanceID: fc.id, ReportInterval: interval, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		fc.c, fc.h = c, c.Switch(name)
		fc.serve = c.Middleware(sdk.MiddlewareOptions{Switches: []*sdk.Handle{fc.h}})(http.HandlerFunc(
			func(w http.ResponseWriter, r *http.Request) {
				if sdk.DegradedLevel(r.Context()) != "" {
					fc.degraded.Add(1)
				}
			}))
		clients[i] = fc
	}
	for _, fc := range clients {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := fc.c.WaitReady(wctx)
		cancel()
		if err != nil {
			t.Fatalf("%s: %v", fc.id, err)
		}
	}

	// Traffic: a request to every instance every 5 ms, until stopped (at
	// the latest after a minute).
	var wg sync.WaitGroup
	quit := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		end := time.After(time.Minute)
		for {
			select {
			case <-quit:
				return
			case <-end:
				return
			case <-tick.C:
				for _, fc := range clients {
					fc.serve.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/recommendations", nil))
				}
			}
		}
	}()
	var stopOnce sync.Once
	stopTraffic := func() { stopOnce.Do(func() { close(quit); wg.Wait() }) }
	t.Cleanup(stopTraffic)

	sw.State, sw.Version = wire.StateOn, 2
	flipped := time.Now()
	rev := publish(sw)
	servertest.Eventually(t, 10*time.Second, "every client applied the flip", func() bool {
		for _, fc := range clients {
			if fc.c.Revision() < rev {
				return false
			}
		}
		return true
	})
	servertest.Eventually(t, interval+time.Second, "applied by 20/20", func() bool {
		applied, total := m.AppliedBy(app, rev, nil)
		return applied == n && total == n
	})

	// Which instances the flip degrades, as each one's own code sees it.
	on := map[string]bool{}
	for _, fc := range clients {
		if fc.h.On(ctx) {
			fc.degraded.Add(1)
			on[fc.id] = true
		}
	}
	if len(on) == 0 || len(on) == n {
		t.Fatalf("%d of %d instances degraded at 50 %%: the test needs both kinds", len(on), n)
	}
	answering := func(v fleet.SwitchView) map[string]bool {
		set := map[string]bool{}
		for _, in := range v.Instances {
			if in.DegradedRate > 0 {
				set[in.ID] = true
			}
		}
		return set
	}
	// A drill's "takes effect": within 5 s of the flip the model sees
	// exactly the degraded instances answering degraded.
	var v fleet.SwitchView
	servertest.Eventually(t, 5*time.Second-time.Since(flipped), "the degraded instances answering degraded", func() bool {
		v = m.Switch(app, name)
		return sameSet(answering(v), on) && v.AnsweringDegraded == len(on)
	})
	t.Logf("answering degraded %d/%d, %v after the flip", v.AnsweringDegraded, v.Live, time.Since(flipped))
	if v.Live != n || v.Applied != n || v.Targeted != len(on) || v.Revision != rev {
		t.Errorf("view: live %d applied %d targeted %d revision %d; want %d, %d, %d, %d", v.Live, v.Applied, v.Targeted, v.Revision, n, n, len(on), rev)
	}
	for _, in := range v.Instances {
		if in.Targeted != on[in.ID] || !in.Signals {
			t.Errorf("%s: targeted %v signals %v, but the client answers degraded: %v", in.ID, in.Targeted, in.Signals, on[in.ID])
		}
	}
	servertest.Eventually(t, interval+time.Second, "a degraded-path p99", func() bool {
		return m.Switch(app, name).DegradedP99 != nil
	})

	// Traffic stops: within an interval and a second the model's counters
	// are each client's own.
	stopTraffic()
	var want uint64
	for _, fc := range clients {
		want += fc.degraded.Load()
	}
	servertest.Eventually(t, interval+time.Second, "the model's degraded counters equal the clients'", func() bool {
		v = m.Switch(app, name)
		var sum uint64
		for _, in := range v.Instances {
			sum += in.Degraded
		}
		return sum == want && sameCounts(v, clients)
	})
	t.Logf("%d degraded answers across %d instances", want, len(on))
}

func sameSet(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

// sameCounts reports whether the model holds every client, with the
// client's own degraded count.
func sameCounts(v fleet.SwitchView, clients []*fleetClient) bool {
	got := map[string]uint64{}
	for _, in := range v.Instances {
		got[in.ID] = in.Degraded
	}
	for _, fc := range clients {
		if d, ok := got[fc.id]; !ok || d != fc.degraded.Load() {
			return false
		}
	}
	return len(got) == len(clients)
}
