package main

import (
	"errors"
	"flag"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseConfig(t *testing.T) {
	env := func(m map[string]string) func(string) string {
		return func(k string) string { return m[k] }
	}
	// Defaults with only the required app.
	cfg, err := parseConfig([]string{"--app", "checkout"}, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Listen != "127.0.0.1:8090" || cfg.OFREPListen != "127.0.0.1:8016" || cfg.Namespace != "default" || cfg.SnapshotDir != "./agent-data" ||
		cfg.EtcdEndpoints != nil || cfg.ShutdownTimeout != 10*time.Second {
		t.Errorf("defaults = %+v", cfg)
	}

	// Environment twins, and flags winning over them.
	cfg, err = parseConfig([]string{"--namespace", "prod", "--labels", "zone=b"}, env(map[string]string{
		"SWITCHYARD_AGENT_APP":             "checkout",
		"SWITCHYARD_NAMESPACE":             "staging",
		"SWITCHYARD_AGENT_LISTEN":          "127.0.0.1:9999",
		"SWITCHYARD_AGENT_OFREP_LISTEN":    "off",
		"SWITCHYARD_ETCD_ENDPOINTS":        "http://a:2379, http://b:2379",
		"SWITCHYARD_AGENT_INSTANCE_ID":     "pod-7",
		"SWITCHYARD_AGENT_LABELS":          "zone=a,canary=true",
		"SWITCHYARD_AGENT_SNAPSHOT_DIR":    "/var/lib/switchyard",
		"SWITCHYARD_AGENT_OFREP_RATE":      "50",
		"SWITCHYARD_AGENT_REPORT_INTERVAL": "2s",
		"SWITCHYARD_AGENT_ETCD_CA_FILE":    "/etc/etcd/ca.pem",
		"SWITCHYARD_AGENT_ETCD_USERNAME":   "switchyard-sdk-prod",
		"SWITCHYARD_AGENT_ETCD_PASSWORD":   "from-the-environment",
		// The console's own variables do not move the agent.
		"SWITCHYARD_ETCD_USERNAME": "switchyard-console-prod",
		"SWITCHYARD_LISTEN":        "127.0.0.1:1",
		"SWITCHYARD_APP":           "other",
		"SWITCHYARD_SNAPSHOT_DIR":  "/elsewhere",
	}), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"http://a:2379", "http://b:2379"}
	if cfg.App != "checkout" || cfg.Namespace != "prod" || cfg.Listen != "127.0.0.1:9999" || cfg.InstanceID != "pod-7" ||
		!reflect.DeepEqual(cfg.EtcdEndpoints, want) || !reflect.DeepEqual(cfg.Labels, map[string]string{"zone": "b"}) ||
		cfg.SnapshotDir != "/var/lib/switchyard" || cfg.OFREPOn() || cfg.OFREPRate != 50 || cfg.ReportInterval != 2*time.Second ||
		cfg.Etcd.CAFile != "/etc/etcd/ca.pem" || cfg.Etcd.Username != "switchyard-sdk-prod" || cfg.Etcd.Password != "from-the-environment" {
		t.Errorf("cfg = %+v", cfg)
	}
}

func TestParseConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{nil, nil, "--app or SWITCHYARD_AGENT_APP: required"},
		{[]string{"--app", "Check Out"}, nil, `--app or SWITCHYARD_AGENT_APP: "Check Out" is not a valid app name`},
		{[]string{"--app", "x", "--ofrep-listen", "8016"}, nil, "--ofrep-listen or SWITCHYARD_AGENT_OFREP_LISTEN"},
		{[]string{"--app", "x", "--ofrep-rate", "-1"}, nil, "--ofrep-rate"},
		{[]string{"--app", "x", "--report-interval", "10ms"}, nil, "--report-interval"},
		{[]string{"--app", "x", "--namespace", "-bad"}, nil, "--namespace"},
		{[]string{"--app", "x", "--listen", "8090"}, nil, "--listen"},
		{[]string{"--app", "x", "--labels", "zone"}, nil, "labels"},
		{[]string{"--app", "x", "--labels", "zone=a,zone=b"}, nil, `"zone" given twice`},
		{[]string{"--app", "x", "--shutdown-timeout", "0s"}, nil, "--shutdown-timeout"},
		{[]string{"--app", "x", "extra"}, nil, "unexpected arguments"},
		{[]string{"--app", "x", "--etcd-username", "u"}, nil, "without a password"},
		{[]string{"--app", "x", "--etcd-cert-file", "c.pem"}, nil, "cert file and key file"},
		{[]string{"--bogus"}, nil, "bogus"},
		{[]string{"--app", "x"}, map[string]string{"SWITCHYARD_AGENT_LABELS": "=a"}, "SWITCHYARD_AGENT_LABELS"},
		{[]string{"--app", "x"}, map[string]string{"SWITCHYARD_AGENT_SHUTDOWN_TIMEOUT": "soon"}, "SWITCHYARD_AGENT_SHUTDOWN_TIMEOUT"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, err := parseConfig(tc.args, func(k string) string { return tc.env[k] }, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

// TestHelp: -h prints every flag once, and no help text contradicts the
// default printed after it.
func TestHelp(t *testing.T) {
	var usage strings.Builder
	if _, err := parseConfig([]string{"-h"}, func(string) string { return "" }, &usage); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: err = %v, want flag.ErrHelp", err)
	}
	help := usage.String()
	for _, want := range []string{
		`directory of the disk snapshot; --snapshot-dir="" keeps none (default "./agent-data")`,
		`keep it on loopback, the API has no authentication (default "127.0.0.1:8090")`,
	} {
		if !strings.Contains(help, want) {
			t.Errorf("help lacks %q:\n%s", want, help)
		}
	}
	if strings.Contains(help, ") (default") {
		t.Errorf("help stacks a parenthesis before the default:\n%s", help)
	}
}
