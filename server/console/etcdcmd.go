package console

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/switchyard-io/switchyard/internal/envconf"
	"github.com/switchyard-io/switchyard/server/etcdauth"
)

// EtcdCommand runs `console etcd init-auth`: it creates the namespace's
// etcd roles and users (see server/etcdauth) and turns authentication on.
// cfg carries the environment's settings; args are the command's words
// and flags. It prints what it did, never a password.
func EtcdCommand(ctx context.Context, cfg Config, getenv func(string) string, args []string, stdout io.Writer) error {
	const help = "console etcd -h"
	if len(args) == 0 || args[0] != "init-auth" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			fmt.Fprint(stdout, etcdUsage)
			return flag.ErrHelp
		}
		return fmt.Errorf("etcd: name a command: init-auth (see %s)", help)
	}
	fs := flag.NewFlagSet("console etcd init-auth", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	cfg.AddFlags(fs, "etcd-endpoints", "namespace", "etcd-ca-file", "etcd-cert-file", "etcd-key-file", "etcd-server-name", "etcd-username", "etcd-password")
	// The users' passwords: each from $SWITCHYARD_ETCD_<WHO>_PASSWORD, the
	// file its _FILE names, or --<who>-password-file (which wins).
	var pw etcdauth.Passwords
	env := envconf.New(getenv)
	users := []struct {
		who string
		pw  *string
	}{{"root", &pw.Root}, {"console", &pw.Console}, {"sdk", &pw.SDK}}
	for _, u := range users {
		name := "SWITCHYARD_ETCD_" + strings.ToUpper(u.who) + "_PASSWORD"
		env.Secret(name, (*stringValue)(u.pw).Set)
		envconf.SecretFileVar(fs, (*stringValue)(u.pw), u.who+"-password", "`file` holding the "+u.who+" user's password ($"+name+envconf.FileSuffix+", or the password itself in $"+name+")")
	}
	if err := env.Err(); err != nil {
		return fmt.Errorf("etcd init-auth: %s", strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	if err := envconf.ParseFlags(fs, args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, etcdUsage)
			fs.SetOutput(stdout)
			fs.PrintDefaults()
			return err
		}
		return fmt.Errorf("%w (see %s)", err, help)
	}
	if len(cfg.EtcdEndpoints) == 0 {
		return fmt.Errorf("etcd init-auth: %s is required: the cluster to set up", settingName("etcd-endpoints"))
	}
	for _, u := range users {
		if u.who != "root" && len(*u.pw) < 12 {
			name := "SWITCHYARD_ETCD_" + strings.ToUpper(u.who) + "_PASSWORD"
			return fmt.Errorf("etcd init-auth: the %s user's password (--%s-password-file, %s or %s%s) must be at least 12 characters", u.who, u.who, name, name, envconf.FileSuffix)
		}
	}
	cli, err := EtcdClient(cfg.EtcdEndpoints, cfg.Etcd)
	if err != nil {
		return fmt.Errorf("etcd init-auth: connect: %w", err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	done, err := etcdauth.Init(ctx, cli, cfg.Namespace, pw)
	for _, d := range done {
		fmt.Fprintln(stdout, d)
	}
	if err != nil {
		return fmt.Errorf("etcd init-auth: %w", err)
	}
	fmt.Fprintf(stdout, "consoles connect as %s, SDKs and agents as %s (--etcd-username / SWITCHYARD_ETCD_USERNAME)\n",
		etcdauth.ConsoleUser(cfg.Namespace), etcdauth.SDKUser(cfg.Namespace))
	return nil
}

const etcdUsage = `Usage:
  console etcd init-auth [flags]   create the namespace's etcd roles and users, then enable auth

Roles: switchyard-console-<namespace> reads and writes /switchyard/v1/<namespace>/;
switchyard-sdk-<namespace> reads its switches/, limits/ and overrides/ and writes only
instances/. Each gets a user of the same name; root is created if missing. Passwords come
from files (--*-password-file) or SWITCHYARD_ETCD_{ROOT,CONSOLE,SDK}_PASSWORD[_FILE].
On a cluster whose auth is already on, connect as root (--etcd-username root).

Flags:
`
