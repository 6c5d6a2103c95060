package trigger_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/sdk/wire"
	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/signal"
	"github.com/switchyard-io/switchyard/server/trigger"
)

// TestQueryRunOnSave: a rule's query runs once when it is saved. One that
// answers several series is refused (400 naming query and the count) and
// nothing is written; one with no data now is saved with a warning.
func TestQueryRunOnSave(t *testing.T) {
	prom, src := startPrometheus(t)
	r := newRig(t, "postgres", prom, src)
	ctx := context.Background()
	if _, _, err := r.core.CreateSwitch(ctx, admin, "checkout", server.SwitchInput{Name: "reco", Level: wire.L3, Reason: "seed"}); err != nil {
		t.Fatal(err)
	}
	prom.Exporter.Set("saved_many_a", 1)
	prom.Exporter.Set("saved_many_b", 2)
	prom.Sync(t)
	r.clock.set(time.Now().UTC()) // the query runs at the console's now
	rule := func(name, query string) trigger.Input {
		return trigger.Input{Name: name, Switch: "reco", Source: signal.SourcePrometheus, Query: query, Reason: "test",
			Trigger: trigger.CondInput{Op: ">", Threshold: f(80)}, Recover: trigger.CondInput{Op: "<", Threshold: f(60)}}
	}

	_, err := r.svc.Create(ctx, admin, "checkout", rule("many", `{__name__=~"saved_many_.+"}`))
	var ve *server.ValidationError
	if !errors.As(err, &ve) || ve.Fields[0].Field != "query" || !strings.Contains(ve.Fields[0].Msg, "returns 2 series") {
		t.Fatalf("a query of two series: %v", err)
	}
	if _, err := r.svc.Get(ctx, "checkout", "many"); !errors.Is(err, server.ErrNotFound) {
		t.Fatalf("the refused rule was written: %v", err)
	}

	v, err := r.svc.Create(ctx, admin, "checkout", rule("quiet", "max(saved_never_set)"))
	if err != nil || len(v.Warnings) != 1 || !strings.Contains(v.Warnings[0], "no data now") {
		t.Fatalf("a query without data now: %+v, %v", v, err)
	}
	t.Cleanup(func() {
		_ = r.svc.Delete(context.Background(), admin, "checkout", "quiet", server.Change{Reason: "end"})
	})

	_, err = r.svc.Update(ctx, admin, "checkout", "quiet", trigger.Patch{Reason: "widen", Fields: []byte(`{"query":"{__name__=~\"saved_many_.+\"}"}`)})
	if !errors.As(err, &ve) || ve.Fields[0].Field != "query" || !strings.Contains(ve.Fields[0].Msg, "2 series") {
		t.Fatalf("a patch to a query of two series: %v", err)
	}
	if v, _ := r.svc.Get(ctx, "checkout", "quiet"); v.Query != "max(saved_never_set)" {
		t.Fatalf("the refused patch was written: %s", v.Query)
	}
}
