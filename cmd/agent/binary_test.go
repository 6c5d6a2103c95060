package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/switchyard-io/switchyard/internal/bintest"
	"github.com/switchyard-io/switchyard/internal/etcdtest"
)

// bin is the agent binary, built once by TestMain.
var bin string

func TestMain(m *testing.M) {
	path, cleanup, err := bintest.Build("agent")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = path
	code := m.Run()
	cleanup()
	os.Exit(code)
}

// agentArgs runs the agent on free ports against an etcd endpoint nobody
// listens on, with a fresh snapshot dir.
func agentArgs(t *testing.T) []string {
	return []string{"--app", "checkout", "--listen", etcdtest.FreeAddr(t), "--ofrep-listen", etcdtest.FreeAddr(t),
		"--etcd-endpoints", "http://" + etcdtest.FreeAddr(t), "--snapshot-dir", t.TempDir()}
}

// fails runs the agent, with the console's and its own listen variables
// unset, and expects the one-line start-up failure.
func fails(t *testing.T, args []string) string {
	t.Helper()
	return bintest.Fails(t, bin, "agent", args, "SWITCHYARD_LISTEN=", "SWITCHYARD_AGENT_LISTEN=")
}

func flagValue(args []string, name string) string {
	for i, a := range args {
		if a == name {
			return args[i+1]
		}
	}
	return ""
}

// TestBinaryStartFailures: each start-up failure exits 1 with one line
// naming the cause and the setting to change, and nothing logged before it
// (no etcd warning: the agent has not started its client yet).
func TestBinaryStartFailures(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, args []string) []string
		want  []string
	}{
		{"API port taken", func(t *testing.T, args []string) []string {
			bintest.HoldPort(t, flagValue(args, "--listen"))
			return args
		}, []string{"address already in use", "change --listen or SWITCHYARD_AGENT_LISTEN"}},
		{"OFREP port taken", func(t *testing.T, args []string) []string {
			bintest.HoldPort(t, flagValue(args, "--ofrep-listen"))
			return args
		}, []string{"address already in use", "change --ofrep-listen or SWITCHYARD_AGENT_OFREP_LISTEN"}},
		{"snapshot dir unusable", func(t *testing.T, args []string) []string {
			return append(args, "--snapshot-dir", "/proc/nope")
		}, []string{"--snapshot-dir or SWITCHYARD_AGENT_SNAPSHOT_DIR", "/proc/nope"}},
		{"snapshot dir is a file", func(t *testing.T, args []string) []string {
			file := filepath.Join(t.TempDir(), "file")
			if err := os.WriteFile(file, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			return append(args, "--snapshot-dir", filepath.Join(file, "snap"))
		}, []string{"--snapshot-dir or SWITCHYARD_AGENT_SNAPSHOT_DIR", "not a directory"}},
		{"token file missing", func(t *testing.T, args []string) []string {
			return append(args, "--ofrep-token-file", filepath.Join(t.TempDir(), "none"))
		}, []string{"--ofrep-token-file or SWITCHYARD_AGENT_OFREP_TOKEN_FILE", "no such file"}},
		{"bad configuration", func(t *testing.T, args []string) []string {
			return append(args, "--namespace", "Prod!")
		}, []string{"--namespace or SWITCHYARD_NAMESPACE"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := fails(t, tc.setup(t, agentArgs(t)))
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("%q lacks %q", msg, w)
				}
			}
		})
	}
}

// TestBinaryServesAndStops: the agent prints where it serves both APIs,
// answers on both, and exits 0 on SIGTERM.
func TestBinaryServesAndStops(t *testing.T) {
	args := agentArgs(t)
	cmd := exec.Command(bin, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stderr)
	serving := ""
	for lines.Scan() {
		if strings.Contains(lines.Text(), "agent serving") {
			serving = lines.Text()
			break
		}
	}
	rest := make(chan string)
	go func() {
		var b strings.Builder
		for lines.Scan() {
			b.WriteString(lines.Text() + "\n")
		}
		rest <- b.String()
	}()
	for _, want := range []string{"addr=" + flagValue(args, "--listen"), "ofrep=" + flagValue(args, "--ofrep-listen")} {
		if !strings.Contains(serving, want) {
			t.Errorf("start-up line %q lacks %q", serving, want)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	after := <-rest
	if err := cmd.Wait(); err != nil {
		t.Errorf("exit after SIGTERM: %v", err)
	}
	if strings.Contains(after, "context canceled") {
		t.Errorf("the shutdown logged its own cancellation as a problem:\n%s", after)
	}
}
