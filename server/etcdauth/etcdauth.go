// Package etcdauth sets up etcd's authentication for one Switchyard
// namespace: least-privilege roles and users for the consoles and for the
// SDKs and agents, then auth itself. `console etcd init-auth` runs it.
//
// The console's role reads and writes the namespace (its switches, limits,
// overrides, the instances it watches and the election under it). The
// SDK's role reads the namespace's switches, limits and overrides and
// writes only instance keys: a service holding SDK credentials can change
// nothing an operator sees, cannot touch the election and cannot read
// another namespace. etcd grants prefixes, so the SDK role covers every
// app's instance keys of the namespace; nothing narrower exists without a
// role per app.
//
// It must not print or log a password.
package etcdauth

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/authpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/switchyard-io/switchyard/sdk/wire"
)

// RootUser is etcd's administrator, which must exist before auth is on.
const RootUser = "root"

// ConsoleUser and SDKUser name the namespace's users (and their roles).
func ConsoleUser(ns string) string { return "switchyard-console-" + ns }

// SDKUser is the user (and role) of the namespace's SDKs and agents.
func SDKUser(ns string) string { return "switchyard-sdk-" + ns }

// Passwords are the users' passwords. Root's is needed only when the root
// user does not exist yet.
type Passwords struct{ Root, Console, SDK string }

// Permission is one grant of a role.
type Permission struct {
	Prefix string
	Type   clientv3.PermissionType
}

// ConsolePermissions are the console role's grants.
func ConsolePermissions(ns string) []Permission {
	return []Permission{{wire.NamespacePrefix(ns), clientv3.PermissionType(authpb.READWRITE)}}
}

// SDKPermissions are the SDK role's grants.
func SDKPermissions(ns string) []Permission {
	read := clientv3.PermissionType(authpb.READ)
	return []Permission{
		{wire.KindPrefix(ns, wire.KindSwitches), read},
		{wire.KindPrefix(ns, wire.KindLimits), read},
		{wire.KindPrefix(ns, wire.KindOverrides), read},
		{wire.KindPrefix(ns, wire.KindInstances), clientv3.PermissionType(authpb.READWRITE)},
	}
}

// Init creates (or updates) the namespace's roles and users and turns
// auth on. It is idempotent: roles are granted their permissions again,
// existing users get the given password, and a cluster whose auth is
// already on is left on (run it then with root's credentials on cli).
// It returns what it did, one line each, without passwords.
func Init(ctx context.Context, cli *clientv3.Client, ns string, pw Passwords) ([]string, error) {
	if !wire.ValidName(ns) {
		return nil, fmt.Errorf("etcdauth: namespace %q must match %s", ns, wire.NamePattern)
	}
	if pw.Console == "" || pw.SDK == "" {
		return nil, errors.New("etcdauth: the console's and the SDK's passwords are required")
	}
	var done []string
	if err := ensureUser(ctx, cli, RootUser, pw.Root, "root", &done); err != nil {
		return done, err
	}
	for _, r := range []struct {
		name  string
		pw    string
		perms []Permission
	}{{ConsoleUser(ns), pw.Console, ConsolePermissions(ns)}, {SDKUser(ns), pw.SDK, SDKPermissions(ns)}} {
		if _, err := cli.RoleAdd(ctx, r.name); err != nil && !errors.Is(err, rpctypes.ErrRoleAlreadyExist) {
			return done, fmt.Errorf("etcdauth: role %s: %w", r.name, err)
		}
		for _, p := range r.perms {
			if _, err := cli.RoleGrantPermission(ctx, r.name, p.Prefix, clientv3.GetPrefixRangeEnd(p.Prefix), p.Type); err != nil {
				return done, fmt.Errorf("etcdauth: grant %s on %s: %w", r.name, p.Prefix, err)
			}
			done = append(done, fmt.Sprintf("role %s: %s on %s*", r.name, authpb.Permission_Type(p.Type), p.Prefix))
		}
		if err := ensureUser(ctx, cli, r.name, r.pw, r.name, &done); err != nil {
			return done, err
		}
	}
	if _, err := cli.AuthEnable(ctx); err != nil {
		return done, fmt.Errorf("etcdauth: enable auth: %w", err)
	}
	return append(done, "auth enabled"), nil
}

// ensureUser adds user with password pw and grants it role; an existing
// user gets pw (when given) and the role again.
func ensureUser(ctx context.Context, cli *clientv3.Client, user, pw, role string, done *[]string) error {
	_, err := cli.UserGet(ctx, user)
	switch {
	case errors.Is(err, rpctypes.ErrUserNotFound):
		if pw == "" {
			return fmt.Errorf("etcdauth: user %s does not exist: give its password", user)
		}
		if _, err := cli.UserAdd(ctx, user, pw); err != nil {
			return fmt.Errorf("etcdauth: add user %s: %w", user, err)
		}
		*done = append(*done, "user "+user+" added")
	case err != nil:
		return fmt.Errorf("etcdauth: user %s: %w", user, err)
	case pw != "":
		if _, err := cli.UserChangePassword(ctx, user, pw); err != nil {
			return fmt.Errorf("etcdauth: password of %s: %w", user, err)
		}
		*done = append(*done, "user "+user+": password set")
	}
	if role == "root" {
		if _, err := cli.RoleAdd(ctx, "root"); err != nil && !errors.Is(err, rpctypes.ErrRoleAlreadyExist) {
			return fmt.Errorf("etcdauth: role root: %w", err)
		}
	}
	if _, err := cli.UserGrantRole(ctx, user, role); err != nil {
		return fmt.Errorf("etcdauth: grant %s to %s: %w", role, user, err)
	}
	*done = append(*done, "user "+user+": role "+role)
	return nil
}
