package sdk

import (
	"context"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/etcdtest"
	"github.com/switchyard-io/switchyard/sdk/wire"
)

func TestSwitches(t *testing.T) {
	srv := etcdtest.Start(t)
	cli := srv.Client(t)
	const ns, app = "test", "checkout"
	putSwitch(t, cli, ns, mkSwitch(app, "recommend", wire.StateOn, 100))
	putSwitch(t, cli, ns, mkSwitch(app, "gone", wire.StateOn, 100))
	putSwitch(t, cli, ns, mkSwitch(wire.GlobalApp, "maintenance", wire.StateOff, 0))
	// An app switch shadows the global one of the same name.
	putSwitch(t, cli, ns, mkSwitch(wire.GlobalApp, "recommend", wire.StateOff, 0))
	c := newTestClient(t, Config{Endpoints: []string{srv.Endpoint}, Namespace: ns, App: app})
	c.Switch("never-published") // indexed but without a value
	waitFor(t, 10*time.Second, "initial list", func() bool { return len(c.Switches()) == 3 })

	got := c.Switches()
	if sw := got["recommend"]; sw == nil || sw.App != app || sw.State != wire.StateOn {
		t.Errorf("recommend = %+v, want the app's own switch", sw)
	}
	if sw := got["maintenance"]; sw == nil || sw.App != wire.GlobalApp {
		t.Errorf("maintenance = %+v, want the global switch", sw)
	}
	if _, ok := got["never-published"]; ok {
		t.Error("a name without a published value is listed")
	}

	rev := del(t, cli, wire.SwitchKey(ns, app, "gone"))
	waitFor(t, 10*time.Second, "delete applied", func() bool { return c.Revision() >= rev })
	if _, ok := c.Switches()["gone"]; ok {
		t.Error("deleted switch still listed")
	}
	if c.On(context.Background(), "gone") {
		t.Error("deleted switch still on")
	}
	// The returned map is the caller's: changing it leaves the client alone.
	m := c.Switches()
	delete(m, "recommend")
	if _, ok := c.Switches()["recommend"]; !ok {
		t.Error("deleting from the returned map changed the client")
	}
}
