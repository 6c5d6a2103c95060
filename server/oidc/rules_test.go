package oidc_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/switchyard-io/switchyard/server"
	"github.com/switchyard-io/switchyard/server/oidc"
)

func TestMap(t *testing.T) {
	rules := []oidc.Rule{
		{Group: "sre", Role: server.RoleAdmin},
		{Group: "checkout-oncall", Role: server.RoleOperator, Apps: []string{"checkout"}},
		{Group: "search-oncall", Role: server.RoleOperator, Apps: []string{"search", "checkout"}},
		{Group: "platform", Role: server.RoleOperator, Apps: []string{"*"}},
		{Group: "everyone", Role: server.RoleViewer},
	}
	cases := []struct {
		name     string
		groups   []string
		fallback server.Role
		ok       bool
		role     server.Role
		apps     []string
	}{
		{"no groups, strict", nil, "", false, "", nil},
		{"unmapped groups, strict", []string{"design", "marketing"}, "", false, "", nil},
		{"unmapped groups, default viewer", []string{"design"}, server.RoleViewer, true, server.RoleViewer, nil},
		{"viewer", []string{"everyone"}, "", true, server.RoleViewer, nil},
		{"operator of one app", []string{"everyone", "checkout-oncall"}, "", true, server.RoleOperator, []string{"checkout"}},
		{"operator grants add up, sorted, once", []string{"search-oncall", "checkout-oncall"}, "", true, server.RoleOperator, []string{"checkout", "search"}},
		{"a * grant covers every app", []string{"checkout-oncall", "platform"}, "", true, server.RoleOperator, []string{"*"}},
		{"the highest role wins", []string{"checkout-oncall", "sre", "everyone"}, "", true, server.RoleAdmin, nil},
		{"group names are exact", []string{"SRE", "sre "}, "", false, "", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g, ok := oidc.Map(rules, tc.groups, tc.fallback)
			if ok != tc.ok || g.Role != tc.role || !slices.Equal(g.Apps, tc.apps) {
				t.Fatalf("Map(%v) = %+v, %v; want %s %v, %v", tc.groups, g, ok, tc.role, tc.apps, tc.ok)
			}
			if ok && g.Why == "" {
				t.Fatal("a grant must say why")
			}
		})
	}
}

func TestParseRules(t *testing.T) {
	good := `[{"group":"sre","role":"admin"},{"group":"co","role":"operator","apps":["checkout"]}]`
	rules, err := oidc.ParseRules([]byte(good))
	if err != nil || len(rules) != 2 || rules[1].Apps[0] != "checkout" {
		t.Fatalf("good rules: %+v %v", rules, err)
	}
	bad := []struct{ in, want string }{
		{`{"group":"sre"}`, "JSON array"},
		{`[{"group":"sre","role":"admin","extra":1}]`, "JSON array"},
		{`[{"group":"","role":"admin"}]`, "rules[0].group"},
		{`[{"group":"a","role":"admin"},{"group":"b","role":"root"}]`, "rules[1].role"},
		{`[{"group":"a","role":"operator"}]`, "rules[0].apps"},
		{`[{"group":"a","role":"viewer","apps":["x"]}]`, "rules[0].apps"},
		{`[{"group":"a","role":"operator","apps":["ok","Not An App"]}]`, "rules[0].apps[1]"},
	}
	for _, tc := range bad {
		if _, err := oidc.ParseRules([]byte(tc.in)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseRules(%s) = %v, want an error naming %q", tc.in, err, tc.want)
		}
	}
}
