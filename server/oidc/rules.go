package oidc

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/switchyard-io/switchyard/sdk/wire"
	"github.com/switchyard-io/switchyard/server"
)

// Rule gives the members of an identity-provider group a role and, for
// operators, app grants.
type Rule struct {
	Group string      `json:"group"`
	Role  server.Role `json:"role"`
	Apps  []string    `json:"apps,omitempty"`
}

// ParseRules reads the mapping rules, a JSON array of rules; every bad
// field is named by its index ("rules[1].role").
func ParseRules(data []byte) ([]Rule, error) {
	var rules []Rule
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rules); err != nil {
		return nil, fmt.Errorf("oidc: rules: not a JSON array of {group, role, apps}: %w", err)
	}
	var v server.FieldErrors
	for i, r := range rules {
		at := fmt.Sprintf("rules[%d]", i)
		if strings.TrimSpace(r.Group) == "" {
			v.Add(at+".group", "is required")
		}
		if !r.Role.Valid() {
			v.Add(at+".role", `must be "viewer", "operator" or "admin"`)
		}
		for j, app := range r.Apps {
			if app != server.AllApps && !wire.ValidApp(app) {
				v.Add(fmt.Sprintf("%s.apps[%d]", at, j), "is not a valid app name")
			}
		}
		switch {
		case r.Role == server.RoleOperator && len(r.Apps) == 0:
			v.Add(at+".apps", `an operator rule needs at least one app (or "*")`)
		case r.Role != server.RoleOperator && len(r.Apps) > 0:
			v.Add(at+".apps", "grants apply to operator rules only")
		}
	}
	if err := v.Err(); err != nil {
		return nil, fmt.Errorf("oidc: %w", err)
	}
	return rules, nil
}

// Grant is what the rules give a person.
type Grant struct {
	Role server.Role
	Apps []string // sorted; operators only
	// Why names the groups and the rules that matched ("groups sre →
	// admin"), for the audit log.
	Why string
}

var rank = map[server.Role]int{server.RoleViewer: 1, server.RoleOperator: 2, server.RoleAdmin: 3}

// Map applies rules to a person's groups: the highest role any matching
// rule gives wins, and an operator gets the grants of every matching
// operator rule. With no matching rule the person gets fallback, or
// nothing (ok false) when fallback is "": strict, no rule, no entry.
func Map(rules []Rule, groups []string, fallback server.Role) (g Grant, ok bool) {
	var matched []string
	apps := map[string]bool{}
	for _, r := range rules {
		if !slices.Contains(groups, r.Group) {
			continue
		}
		matched = append(matched, r.Group+" → "+string(r.Role))
		if rank[r.Role] > rank[g.Role] {
			g.Role = r.Role
		}
		if r.Role == server.RoleOperator {
			for _, a := range r.Apps {
				apps[a] = true
			}
		}
	}
	if g.Role == "" {
		if fallback == "" {
			return Grant{}, false
		}
		return Grant{Role: fallback, Why: "no rule matched; default role " + string(fallback)}, true
	}
	if g.Role == server.RoleOperator {
		if apps[server.AllApps] {
			g.Apps = []string{server.AllApps}
		} else {
			for a := range apps {
				g.Apps = append(g.Apps, a)
			}
			slices.Sort(g.Apps)
		}
	}
	g.Why = "groups " + strings.Join(matched, ", ")
	return g, true
}
