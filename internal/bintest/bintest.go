// Package bintest runs the project's binaries in their own tests: it builds
// a binary once per test process and checks the start-up failure contract
// the console and the agent share (exit status 1, one line on stderr that
// names the cause and the setting to change, no panic). Test code only.
package bintest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Build compiles the main package in the working directory (a test's own
// package) into a temporary directory, for TestMain. cleanup removes it.
func Build(name string) (path string, cleanup func(), err error) {
	dir, err := os.MkdirTemp("", name+"-bin")
	if err != nil {
		return "", nil, err
	}
	path = filepath.Join(dir, name)
	if out, err := exec.Command("go", "build", "-o", path, ".").CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("build %s: %v\n%s", name, err, out)
	}
	return path, func() { os.RemoveAll(dir) }, nil
}

// Fails runs bin with args, env added to the environment, and expects it
// to exit with status 1 within 30 s, having written exactly one line to
// stderr: "<prefix>: …", the prefix once, no panic. It returns the line.
func Fails(t testing.TB, bin, prefix string, args []string, env ...string) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("%s kept running:\nstdout: %s\nstderr: %s", prefix, stdout.String(), stderr.String())
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("exit: %v, want status 1\nstderr: %s", err, stderr.String())
	}
	msg := strings.TrimSuffix(stderr.String(), "\n")
	if strings.Contains(msg, "\n") || !strings.HasPrefix(msg, prefix+": ") ||
		strings.HasPrefix(msg, prefix+": "+prefix+":") || strings.Contains(msg, "panic") {
		t.Fatalf("stderr is not one line of error:\n%s", stderr.String())
	}
	t.Logf("stderr: %s", msg)
	return msg
}

// HoldPort listens on addr (host:port, or an http:// URL) until the test
// ends, so that a binary started on it finds the port taken.
func HoldPort(t testing.TB, addr string) {
	t.Helper()
	l, err := net.Listen("tcp", strings.TrimPrefix(addr, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
}
