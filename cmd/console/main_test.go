package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/etcdtest"
)

// TestBinaryEmbeddedDefaults builds the console, starts it with nothing but
// a data dir and free ports (embedded etcd and SQLite), checks that it prints
// its addresses and a bootstrap token that works, then stops it with SIGTERM
// and expects a clean exit; a second start reuses the data without printing
// a new token, and `audit verify` accepts the chain.
func TestBinaryEmbeddedDefaults(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "console")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	data := t.TempDir()
	listen := etcdtest.FreeAddr(t)
	args := []string{"--data-dir", data, "--listen", listen,
		"--embedded-etcd-client-url", "http://" + etcdtest.FreeAddr(t),
		"--embedded-etcd-peer-url", "http://" + etcdtest.FreeAddr(t)}

	out := startAndStop(t, bin, args, listen, func(token string) {
		req, _ := http.NewRequest("POST", "http://"+listen+"/api/v1/apps/demo/switches",
			strings.NewReader(`{"name":"s","level":"L3","reason":"smoke"}`))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 201 {
			t.Fatalf("create with the printed token: %v %v", resp, err)
		}
		resp.Body.Close()
	})
	for _, want := range []string{"listening on http://" + listen, "embedded etcd", "sqlite " + data, "bootstrap admin token"} {
		if !strings.Contains(out, want) {
			t.Errorf("start-up output lacks %q:\n%s", want, out)
		}
	}
	out = startAndStop(t, bin, args, listen, nil)
	if strings.Contains(out, "bootstrap admin token") {
		t.Errorf("second start printed a new token:\n%s", out)
	}
	verify, err := exec.Command(bin, "audit", "verify", "--data-dir", data).CombinedOutput()
	if err != nil || !strings.Contains(string(verify), "audit chain ok: 2 events") {
		t.Fatalf("audit verify: %v\n%s", err, verify)
	}
}

var tokenRE = regexp.MustCompile(`sy_[A-Za-z0-9_-]+`)

// startAndStop runs the binary until it serves, calls use with the printed
// token (if any), sends SIGTERM and returns stdout.
func startAndStop(t *testing.T, bin string, args []string, listen string, use func(token string)) string {
	t.Helper()
	cmd := exec.Command(bin, args...)
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	deadline := time.After(30 * time.Second)
	for ready := false; !ready; {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("console exited early:\n%s", out.String())
			}
			fmt.Fprintln(&out, l)
			ready = strings.HasPrefix(l, "  database:")
		case <-deadline:
			cmd.Process.Kill()
			t.Fatalf("console did not start:\n%s", out.String())
		}
	}
	// The token line, if any, follows the database line.
	select {
	case l := <-lines:
		fmt.Fprintln(&out, l)
	case <-time.After(300 * time.Millisecond):
	}
	if use != nil {
		use(tokenRE.FindString(out.String()))
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		for l := range lines {
			fmt.Fprintln(&out, l)
		}
		done <- cmd.Wait()
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("console exit after SIGTERM: %v\n%s", err, out.String())
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatal("console did not stop within 20 s of SIGTERM")
	}
	return out.String()
}

// TestAuditNeedsExistingDatabase: `audit verify` pointed at a data dir with
// no database fails instead of creating an empty log that verifies.
func TestAuditNeedsExistingDatabase(t *testing.T) {
	t.Setenv("SWITCHYARD_DATABASE_URL", "")
	dir := filepath.Join(t.TempDir(), "typo")
	err := run([]string{"audit", "verify", "--data-dir", dir}, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "no database at") {
		t.Fatalf("audit verify on a missing database: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the data dir was created: %v", err)
	}
}
