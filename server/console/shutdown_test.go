package console_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/servertest"
	"github.com/switchyard-io/switchyard/sdk"
	"github.com/switchyard-io/switchyard/server/console"
)

// TestShutdownWithConnectedClient: a console on its embedded etcd shuts
// down promptly while an SDK client watches it (etcd used to wait out the
// open watch stream, 8.7 s), and nothing is lost: the client keeps its
// state, and after a restart on the same data dir it receives the next
// change.
func TestShutdownWithConnectedClient(t *testing.T) {
	cfg := embeddedConfig(t)
	c, err := console.Start(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitLeader(t, c)
	mustStatus(t, call(t, c, "POST", "/api/v1/apps/checkout/switches", adminToken, `{"name":"reviews","level":"L3","reason":"seed"}`), 201)
	mustStatus(t, call(t, c, "POST", "/api/v1/apps/checkout/switches/reviews/on", adminToken, `{"reason":"before shutdown"}`), 200)

	ctx := context.Background()
	client, err := sdk.New(ctx, sdk.Config{
		Endpoints: []string{cfg.EmbeddedEtcdURL}, App: "checkout", SnapshotDir: t.TempDir(),
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	reviews := client.Switch("reviews")
	servertest.Eventually(t, 10*time.Second, "the client sees the switch on", func() bool { return reviews.On(ctx) })

	began := time.Now()
	stop(c)
	took := time.Since(began)
	t.Logf("shutdown with a connected SDK client took %v", took.Round(time.Millisecond))
	if took > 3*time.Second {
		t.Errorf("shutdown took %v with a client connected; want well under 3s", took)
	}
	if !reviews.On(ctx) {
		t.Fatal("the client lost its state when the console stopped")
	}

	c, err = console.Start(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stop(c)
	waitLeader(t, c)
	mustStatus(t, call(t, c, "POST", "/api/v1/apps/checkout/switches/reviews/off", adminToken, `{"reason":"after the restart"}`), 200)
	servertest.Eventually(t, 20*time.Second, "the client reconnects and sees the switch off", func() bool { return !reviews.On(ctx) })
}
