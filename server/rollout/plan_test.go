package rollout

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/fleet"
	"github.com/switchyard-io/switchyard/server/signal"
)

// sources are the console's two metric sources; checking a query needs
// neither a running fleet feed nor a reachable Prometheus.
func sources(t *testing.T, withProm bool) signal.Sources {
	t.Helper()
	s := signal.Sources{Fleet: fleet.New(fleet.Config{Namespace: "test"}).Source}
	if withProm {
		p, err := signal.NewPrometheus(signal.PrometheusConfig{Address: "http://127.0.0.1:1"})
		if err != nil {
			t.Fatal(err)
		}
		s.Prometheus = p
	}
	return s
}

// TestInput checks the API's plan input: each bad input names its field,
// and every bad field of one request is listed.
func TestInput(t *testing.T) {
	cases := []struct {
		name   string
		body   string
		prom   bool
		fields []string
	}{
		{"the default template", `{"switch":"reco","template":"default","reason":"r"}`, false, nil},
		{"explicit steps", `{"switch":"reco","steps":[{"percent":5,"selector":"zone=a","hold":"1m"},{"selector":"zone=a"},{"percent":100}],"reason":"r"}`, false, nil},
		{"a prometheus condition", `{"switch":"reco","template":"default","gate":{"conditions":[{"source":"prometheus","query":"sum(rate(errors_total[1m]))","op":"<","threshold":5}]}}`, true, nil},
		{"a staged turn-off", `{"switch":"reco","direction":"off","steps":[{"percent":50},{"percent":10},{"percent":0}]}`, false, nil},
		{"no switch", `{"template":"default"}`, false, []string{"switch"}},
		{"a bad switch name", `{"switch":"Reco!","template":"default"}`, false, []string{"switch"}},
		{"an unknown template", `{"switch":"reco","template":"yolo"}`, false, []string{"template"}},
		{"canaries cannot turn off", `{"switch":"reco","template":"canaries","direction":"off"}`, false, []string{"template"}},
		{"template and steps", `{"switch":"reco","template":"default","steps":[{"percent":5}]}`, false, []string{"steps"}},
		{"no steps", `{"switch":"reco"}`, false, []string{"steps"}},
		{"a bad direction", `{"switch":"reco","direction":"up","template":"default"}`, false, []string{"direction"}},
		{"percent above 100", `{"switch":"reco","steps":[{"percent":101}]}`, false, []string{"steps[0].percent"}},
		{"percent below 0", `{"switch":"reco","steps":[{"percent":-1}]}`, false, []string{"steps[0].percent"}},
		{"percent with three decimals", `{"switch":"reco","steps":[{"percent":1.234}]}`, false, []string{"steps[0].percent"}},
		{"percent not increasing", `{"switch":"reco","steps":[{"percent":50},{"percent":20}]}`, false, []string{"steps[1].percent"}},
		{"percent repeated", `{"switch":"reco","steps":[{"percent":50},{"percent":50}]}`, false, []string{"steps[1].percent"}},
		{"a step without percent or selector", `{"switch":"reco","steps":[{"hold":"1m"}]}`, false, []string{"steps[0].percent"}},
		{"0 in a turn-on", `{"switch":"reco","steps":[{"percent":0},{"percent":50}]}`, false, []string{"steps[0].percent"}},
		{"a turn-off not ending off", `{"switch":"reco","direction":"off","steps":[{"percent":50}]}`, false, []string{"steps[0].percent"}},
		{"a turn-off widening", `{"switch":"reco","direction":"off","steps":[{"percent":20},{"percent":50},{"percent":0}]}`, false, []string{"steps[1].percent"}},
		{"a selector narrowing a turn-on", `{"switch":"reco","steps":[{"percent":10},{"percent":50,"selector":"zone=a"}]}`, false, []string{"steps[1].percent"}},
		{"a bad selector", `{"switch":"reco","steps":[{"selector":"zone=a,,"}]}`, false, []string{"steps[0].selector"}},
		{"a negative hold", `{"switch":"reco","steps":[{"percent":5,"hold":"-5m"}]}`, false, []string{"steps[0].hold"}},
		{"a hold that is no duration", `{"switch":"reco","steps":[{"percent":5,"hold":"soon"}]}`, false, []string{"steps[0].hold"}},
		{"a hold of a month", `{"switch":"reco","steps":[{"percent":5,"hold":"720h"}]}`, false, []string{"steps[0].hold"}},
		{"an unknown source", `{"switch":"reco","template":"default","gate":{"conditions":[{"source":"graphite","query":"x","op":"<","threshold":1}]}}`, false, []string{"gate.conditions[0].source"}},
		{"prometheus not configured", `{"switch":"reco","template":"default","gate":{"conditions":[{"source":"prometheus","query":"up","op":"<","threshold":1}]}}`, false, []string{"gate.conditions[0].source"}},
		{"a fleet query that does not parse", `{"switch":"reco","template":"default","gate":{"conditions":[{"source":"fleet","query":"degraded_rate{switch=reco}","op":"<","threshold":1}]}}`, false, []string{"gate.conditions[0].query"}},
		{"a PromQL query that does not parse", `{"switch":"reco","template":"default","gate":{"conditions":[{"source":"prometheus","query":"sum(rate(x[1m])","op":"<","threshold":1}]}}`, true, []string{"gate.conditions[0].query"}},
		{"a range vector", `{"switch":"reco","template":"default","gate":{"conditions":[{"source":"prometheus","query":"x[5m]","op":"<","threshold":1}]}}`, true, []string{"gate.conditions[0].query"}},
		{"an unknown op", `{"switch":"reco","template":"default","gate":{"conditions":[{"source":"fleet","query":"instances","op":"≈","threshold":1}]}}`, false, []string{"gate.conditions[0].op"}},
		{"no threshold", `{"switch":"reco","template":"default","gate":{"conditions":[{"source":"fleet","query":"instances","op":">"}]}}`, false, []string{"gate.conditions[0].threshold"}},
		{"min_applied 0", `{"switch":"reco","template":"default","gate":{"min_applied":0}}`, false, []string{"gate.min_applied"}},
		{"min_applied above 1", `{"switch":"reco","template":"default","gate":{"min_applied":1.5}}`, false, []string{"gate.min_applied"}},
		{"a negative failure_limit", `{"switch":"reco","template":"default","gate":{"failure_limit":-1}}`, false, []string{"gate.failure_limit"}},
		{"a bad on_no_data", `{"switch":"reco","template":"default","gate":{"on_no_data":"ignore"}}`, false, []string{"gate.on_no_data"}},
		{"a bad interval", `{"switch":"reco","template":"default","gate":{"interval":"1ms"}}`, false, []string{"gate.interval"}},
		{"a bad on_failure", `{"switch":"reco","template":"default","on_failure":"panic"}`, false, []string{"on_failure"}},
		{"a step's own gate", `{"switch":"reco","steps":[{"percent":5,"gate":{"conditions":[{"source":"fleet","query":"nope","op":"<","threshold":1}]}}]}`, false, []string{"steps[0].gate.conditions[0].query"}},
		{"every bad field at once", `{"switch":"reco","steps":[{"percent":150,"hold":"-1s"},{"percent":5}],"on_failure":"x"}`, false, []string{"steps[0].percent", "steps[0].hold", "on_failure"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var in Input
			if err := server.DecodeStrict([]byte(tc.body), &in); err != nil {
				t.Fatalf("decode: %v", err)
			}
			p, err := in.plan(context.Background(), sources(t, tc.prom), "checkout")
			var got []string
			if err != nil {
				ve, ok := err.(*server.ValidationError)
				if !ok {
					t.Fatalf("not a validation error: %v", err)
				}
				for _, f := range ve.Fields {
					got = append(got, f.Field)
				}
			}
			if strings.Join(got, " ") != strings.Join(tc.fields, " ") {
				t.Fatalf("fields %v, want %v (%v)", got, tc.fields, err)
			}
			if err == nil {
				if _, err := json.Marshal(p); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestStartPlanValidates: a plan built in Go is checked like the API's.
func TestPlanValidate(t *testing.T) {
	p := Plan{Steps: []Step{{Percent: 5}, {Percent: 1}}, Reason: "r"}
	p.normalize()
	var v server.FieldErrors
	p.validate(context.Background(), sources(t, false), "checkout", &v, "", true)
	if len(v) != 1 || v[0].Field != "steps[1].percent" {
		t.Fatalf("errors %v", v.Err())
	}
	if p.Direction != DirectionOn || p.OnFailure != FailRevert || p.Steps[0].Gate.MinApplied != 1 || p.Steps[0].Gate.OnNoData != NoDataPause {
		t.Fatalf("defaults: %+v", p)
	}
}
