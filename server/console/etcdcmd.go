package console

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

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
	cfg.AddFlags(fs, "etcd-endpoints", "namespace", "etcd-ca-file", "etcd-cert-file", "etcd-key-file", "etcd-server-name", "etcd-username", "etcd-password-file")
	secrets := map[string]*string{}
	for _, who := range []string{"root", "console", "sdk"} {
		secrets[who] = fs.String(who+"-password-file", "", "`file` holding the "+who+" user's password ($SWITCHYARD_ETCD_"+strings.ToUpper(who)+"_PASSWORD_FILE, or the password itself in $SWITCHYARD_ETCD_"+strings.ToUpper(who)+"_PASSWORD)")
	}
	if err := fs.Parse(args[1:]); err != nil {
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
	var pw etcdauth.Passwords
	for who, dst := range map[string]*string{"root": &pw.Root, "console": &pw.Console, "sdk": &pw.SDK} {
		env := "SWITCHYARD_ETCD_" + strings.ToUpper(who) + "_PASSWORD"
		file := *secrets[who]
		if file == "" {
			file = getenv(env + "_FILE")
		}
		*dst = getenv(env)
		if file != "" {
			b, err := os.ReadFile(file)
			if err != nil {
				return fmt.Errorf("etcd init-auth: --%s-password-file: %w", who, err)
			}
			*dst = strings.TrimRight(string(b), "\r\n")
		}
		if who != "root" && len(*dst) < 12 {
			return fmt.Errorf("etcd init-auth: the %s user's password (--%s-password-file or %s) must be at least 12 characters", who, who, env)
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
