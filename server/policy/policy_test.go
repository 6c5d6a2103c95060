package policy_test

import (
	"testing"

	"github.com/switchyard-io/switchyard/server/policy"
)

func TestDecide(t *testing.T) {
	protected := policy.Policy{Protected: true, Approvals: 1}
	two := policy.Policy{Protected: true, Approvals: 2}
	custom := policy.Policy{Protected: true, Approvals: 1, Rules: []policy.Rule{policy.SwitchOnL3}}
	noGlass := policy.Policy{Protected: true, Approvals: 1, NoBreakGlass: true}
	person := func(kind, level, from, to string) policy.Change {
		return policy.Change{Kind: kind, Level: level, From: from, To: to, App: "checkout", Person: true}
	}
	with := func(c policy.Change, f func(*policy.Change)) policy.Change { f(&c); return c }
	apply, held, refuse := policy.Apply, policy.NeedsApproval, policy.Refuse
	cases := []struct {
		name   string
		p      policy.Policy
		c      policy.Change
		want   policy.Outcome
		n      int
		rule   policy.Rule
		broken bool
	}{
		{"unprotected app: L5 on applies", policy.Policy{}, person("switch.on", "L5", "off", "on"), apply, 0, "", false},
		{"L1 on applies", protected, person("switch.on", "L1", "off", "on"), apply, 0, "", false},
		{"L3 on applies", protected, person("switch.on", "L3", "off", "on"), apply, 0, "", false},
		{"L4 on is held", protected, person("switch.on", "L4", "off", "on"), held, 1, policy.SwitchOnL4, false},
		{"L5 on is held", protected, person("switch.on", "L5", "off", "on"), held, 1, policy.SwitchOnL5, false},
		{"L5 on needs two where the policy says so", two, person("switch.on", "L5", "off", "on"), held, 2, policy.SwitchOnL5, false},
		{"a rollout change of an L4 already on applies", protected, person("switch.on", "L4", "on", "on"), apply, 0, "", false},
		{"raising a switch that is on to L4 is held", protected, person("switch.update", "L4", "on", "on"), held, 1, policy.SwitchOnL4, false},
		{"editing an L4 switch that is off applies", protected, person("switch.update", "L4", "off", "off"), apply, 0, "", false},
		{"L4 off applies", protected, person("switch.off", "L4", "on", "off"), apply, 0, "", false},
		{"L5 off applies", two, person("switch.off", "L5", "on", "off"), apply, 0, "", false},
		{"deleting a switch is held", protected, person("switch.delete", "L1", "off", ""), held, 1, policy.SwitchDelete, false},
		{"creating a switch applies", protected, person("switch.create", "L5", "", "off"), apply, 0, "", false},
		{"raising a limit is held", protected, with(person("limit.update", "", "on", "on"), func(c *policy.Change) { c.Loosens = true }), held, 1, policy.LimitRaise, false},
		{"lowering a limit applies", protected, person("limit.update", "", "on", "on"), apply, 0, "", false},
		{"turning a limit off raises it", protected, with(person("limit.off", "", "on", "off"), func(c *policy.Change) { c.Loosens = true }), held, 1, policy.LimitRaise, false},
		{"turning a limit on applies", protected, person("limit.on", "", "off", "on"), apply, 0, "", false},
		{"creating a limit applies", protected, person("limit.create", "", "", "on"), apply, 0, "", false},
		{"deleting a limit is held", protected, person("limit.delete", "", "on", ""), held, 1, policy.LimitDelete, false},
		{"a new trigger is held", protected, person("trigger.create", "", "", ""), held, 1, policy.TriggerCreate, false},
		{"a changed drill is held", protected, person("drill.update", "", "", ""), held, 1, policy.DrillUpdate, false},
		{"a staged plan turning L5 on is held", protected, person("rollout.create", "L5", "off", "on"), held, 1, policy.SwitchOnL5, false},
		{"a staged plan turning L5 off applies", protected, person("rollout.create", "L5", "on", "off"), apply, 0, "", false},
		{"a staged plan turning L2 on applies", protected, person("rollout.create", "L2", "off", "on"), apply, 0, "", false},
		{"a custom policy holds L3", custom, person("switch.on", "L3", "off", "on"), held, 1, policy.SwitchOnL3, false},
		{"a custom policy without L4 lets it through", custom, person("switch.on", "L4", "off", "on"), apply, 0, "", false},
		{"break-glass applies, marked", protected, with(person("switch.on", "L5", "off", "on"), func(c *policy.Change) { c.BreakGlass = true }), apply, 0, policy.SwitchOnL5, true},
		{"break-glass on a change nothing holds is a plain apply", protected, with(person("switch.on", "L2", "off", "on"), func(c *policy.Change) { c.BreakGlass = true }), apply, 0, "", false},
		{"break-glass where the app forbids it is refused", noGlass, with(person("switch.delete", "L1", "off", ""), func(c *policy.Change) { c.BreakGlass = true }), refuse, 0, policy.SwitchDelete, false},
		{"a trigger's turn-on applies under its rule's approval", protected, policy.Change{Kind: "switch.on", Level: "L5", From: "off", To: "on", App: "checkout", Cause: "trigger/checkout/cpu"}, apply, 0, "", false},
		{"a drill's change applies", protected, policy.Change{Kind: "switch.delete", App: "checkout", Cause: "drill/checkout/x#1"}, apply, 0, "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := policy.Decide(tc.p, tc.c)
			if d.Outcome != tc.want || d.Approvals != tc.n || d.BreakGlass != tc.broken || (tc.rule != "" && d.Rule != tc.rule) {
				t.Fatalf("Decide = %+v; want %s, %d approvals, rule %q, break-glass %v", d, tc.want, tc.n, tc.rule, tc.broken)
			}
			if d.Why == "" {
				t.Fatal("a decision must say why")
			}
		})
	}
}

func TestPolicyValidate(t *testing.T) {
	if bad := (policy.Policy{Protected: true, Approvals: 1}).Validate(); len(bad) != 0 {
		t.Fatalf("good policy: %v", bad)
	}
	bad := policy.Policy{Protected: true, Approvals: 0, Rules: []policy.Rule{policy.SwitchOnL4, "switch.off"}}.Validate()
	if bad["approvals"] == "" || bad["rules[1]"] == "" || len(bad) != 2 {
		t.Fatalf("bad policy: %v", bad)
	}
}
