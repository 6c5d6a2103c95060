package openfeature_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	of "github.com/open-feature/go-sdk/openfeature"

	"github.com/switchyard-io/switchyard/internal/etcdtest"
	"github.com/switchyard-io/switchyard/sdk"
	sof "github.com/switchyard-io/switchyard/sdk/openfeature"
	"github.com/switchyard-io/switchyard/sdk/wire"
)

const ns, app = "test", "shop"

func TestProviderThroughOpenFeatureClient(t *testing.T) {
	srv := etcdtest.Start(t)
	cli := srv.Client(t)
	publish := func(sw wire.Switch) {
		t.Helper()
		b, _ := json.Marshal(sw)
		if _, err := cli.Put(context.Background(), wire.SwitchKey(ns, app, sw.Name), string(b)); err != nil {
			t.Fatal(err)
		}
	}
	publish(wire.Switch{App: app, Name: "recommend", Level: wire.L3, State: wire.StateOn, Rollout: wire.Rollout{Percent: 100}, Version: 4})
	publish(wire.Switch{App: app, Name: "beta", Level: wire.L1, State: wire.StateOn, Rollout: wire.Rollout{Percent: 50, Stickiness: wire.StickyKey}, Version: 1})
	publish(wire.Switch{App: app, Name: "legacy", Level: wire.L4, State: wire.StateOff, Rollout: wire.Rollout{Percent: 100}, Version: 1})
	// Published before the client starts: its first listing, which
	// WaitReady waits for, holds all three.
	c, err := sdk.New(context.Background(), sdk.Config{Endpoints: []string{srv.Endpoint}, Namespace: ns, App: app, InstanceID: "i-1", LeaseTTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	if c.Switch("legacy").Value() == nil {
		t.Fatal("the first listing lacks a switch published before the client started")
	}

	p := sof.NewProvider(c)
	if err := of.SetNamedProviderAndWait("switchyard-test", p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(of.Shutdown)
	client := of.NewClient("switchyard-test")
	changes := make(chan []string, 16)
	onChange := func(d of.EventDetails) { changes <- d.FlagChanges }
	client.AddHandler(of.ProviderConfigChange, &onChange)

	// A member and a non-member of the 50 % key rollout of "beta".
	var in, out string
	for i := 0; in == "" || out == ""; i++ {
		k := fmt.Sprint("tenant-", i)
		if sdk.Bucket(app, "beta", k) < 5000 {
			in = k
		} else {
			out = k
		}
	}

	bg := context.Background()
	for _, tc := range []struct {
		flag    string
		key     string
		def     bool
		want    bool
		reason  of.Reason
		variant string
		code    of.ErrorCode
	}{
		{flag: "recommend", want: true, reason: of.StaticReason, variant: "on"},
		{flag: "beta", key: in, want: true, reason: of.TargetingMatchReason, variant: "on"},
		{flag: "beta", key: out, want: false, reason: of.DefaultReason, variant: "off"},
		{flag: "legacy", def: true, want: false, reason: of.DefaultReason, variant: "off"},
		{flag: "missing", def: true, want: true, reason: of.ErrorReason, code: of.FlagNotFoundCode},
	} {
		ec := of.NewTargetlessEvaluationContext(nil)
		if tc.key != "" {
			ec = of.NewEvaluationContext(tc.key, nil)
		}
		d, err := client.BooleanValueDetails(bg, tc.flag, tc.def, ec)
		if d.Value != tc.want || d.Reason != tc.reason || d.Variant != tc.variant || d.ErrorCode != tc.code || (err != nil) != (tc.code != "") {
			t.Errorf("%s/%s: %+v, err %v", tc.flag, tc.key, d, err)
		}
	}
	d, _ := client.BooleanValueDetails(bg, "recommend", false, of.EvaluationContext{})
	if lv, _ := d.FlagMetadata.GetString("level"); lv != "L3" {
		t.Errorf("metadata level = %q", lv)
	}

	sd, err := client.StringValueDetails(bg, "legacy", "none", of.EvaluationContext{})
	if err != nil || sd.Value != "L4" || sd.Reason != of.StaticReason {
		t.Errorf("level flag: %+v, %v", sd, err)
	}
	if sd, err := client.StringValueDetails(bg, "missing", "none", of.EvaluationContext{}); err == nil || sd.Value != "none" || sd.ErrorCode != of.FlagNotFoundCode {
		t.Errorf("missing level flag: %+v, %v", sd, err)
	}
	if fd, err := client.FloatValueDetails(bg, "recommend", 1.5, of.EvaluationContext{}); err == nil || fd.Value != 1.5 || fd.ErrorCode != of.TypeMismatchCode || fd.Reason != of.ErrorReason {
		t.Errorf("float: %+v, %v", fd, err)
	}
	if id, err := client.IntValueDetails(bg, "recommend", 7, of.EvaluationContext{}); err == nil || id.Value != 7 || id.ErrorCode != of.TypeMismatchCode {
		t.Errorf("int: %+v, %v", id, err)
	}
	if od, err := client.ObjectValueDetails(bg, "recommend", "x", of.EvaluationContext{}); err == nil || od.Value != "x" || od.ErrorCode != of.TypeMismatchCode {
		t.Errorf("object: %+v, %v", od, err)
	}

	// A flip reaches the OpenFeature client as a configuration change.
	publish(wire.Switch{App: app, Name: "legacy", Level: wire.L4, State: wire.StateOn, Rollout: wire.Rollout{Percent: 100}, Version: 2})
	select {
	case got := <-changes:
		if len(got) != 1 || got[0] != "legacy" {
			t.Errorf("flag changes = %v", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no configuration change event")
	}
	if v, _ := client.BooleanValue(bg, "legacy", false, of.EvaluationContext{}); !v {
		t.Error("legacy still off after the flip")
	}
}
