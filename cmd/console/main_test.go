package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/switchyard-io/switchyard/internal/bintest"
	"github.com/switchyard-io/switchyard/internal/etcdtest"
	"github.com/switchyard-io/switchyard/internal/pgtest"
	"github.com/switchyard-io/switchyard/sdk"
	"github.com/switchyard-io/switchyard/server/console"
)

// bin is the console binary, built once by TestMain.
var bin string

func TestMain(m *testing.M) {
	path, cleanup, err := bintest.Build("console")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin = path
	code := m.Run()
	cleanup()
	os.Exit(code)
}

// embeddedArgs runs the console on its embedded defaults in a fresh data
// dir on free ports.
func embeddedArgs(t *testing.T) (args []string, listen, etcdURL string) {
	listen, etcdURL = etcdtest.FreeAddr(t), "http://"+etcdtest.FreeAddr(t)
	return []string{"--data-dir", t.TempDir(), "--listen", listen,
		"--embedded-etcd-client-url", etcdURL,
		"--embedded-etcd-peer-url", "http://" + etcdtest.FreeAddr(t)}, listen, etcdURL
}

// TestBinaryEmbeddedDefaults starts the console with nothing but a data dir
// and free ports (embedded etcd and SQLite), checks that it prints its
// addresses and a bootstrap token that works, then stops it with SIGTERM
// and expects a clean exit; a second start reuses the data without printing
// a new token, and `audit verify` accepts the chain.
func TestBinaryEmbeddedDefaults(t *testing.T) {
	args, listen, _ := embeddedArgs(t)
	data := args[1]
	// Nothing answers there; the console asks Prometheus only when a rule,
	// gate or drill does.
	args = append(args, "--prometheus-url", "http://127.0.0.1:1/prom")
	out := startAndStop(t, args, listen, func(token string) {
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
	for _, want := range []string{"listening on http://" + listen, "embedded etcd", "sqlite " + data, "bootstrap admin token", "prometheus: http://127.0.0.1:1/prom"} {
		if !strings.Contains(out, want) {
			t.Errorf("start-up output lacks %q:\n%s", want, out)
		}
	}
	out = startAndStop(t, args, listen, nil)
	if strings.Contains(out, "bootstrap admin token") {
		t.Errorf("second start printed a new token:\n%s", out)
	}
	verify, err := exec.Command(bin, "audit", "verify", "--data-dir", data).CombinedOutput()
	if err != nil || !strings.Contains(string(verify), "audit chain ok: 2 events") {
		t.Fatalf("audit verify: %v\n%s", err, verify)
	}
}

var tokenRE = regexp.MustCompile(`sy_[A-Za-z0-9_-]+`)

// running is a console binary that printed its start-up lines.
type running struct {
	cmd   *exec.Cmd
	out   strings.Builder // stdout so far
	lines chan string
}

// start runs the binary until it serves and has printed its start-up
// lines (the token line, if any, included).
func start(t *testing.T, args []string) *running {
	t.Helper()
	r := &running{cmd: exec.Command(bin, args...), lines: make(chan string)}
	stdout, _ := r.cmd.StdoutPipe()
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.cmd.Process.Kill() })
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			r.lines <- sc.Text()
		}
		close(r.lines)
	}()
	deadline := time.After(30 * time.Second)
	for ready := false; !ready; {
		select {
		case l, ok := <-r.lines:
			if !ok {
				t.Fatalf("console exited early:\n%s", r.out.String())
			}
			fmt.Fprintln(&r.out, l)
			ready = strings.HasPrefix(l, "  database:")
		case <-deadline:
			t.Fatalf("console did not start:\n%s", r.out.String())
		}
	}
	// The token line, if any, follows the database line.
	select {
	case l := <-r.lines:
		fmt.Fprintln(&r.out, l)
	case <-time.After(300 * time.Millisecond):
	}
	return r
}

// stop sends SIGTERM, expects a clean exit and returns how long it took.
func (r *running) stop(t *testing.T) time.Duration {
	t.Helper()
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	signalled := time.Now()
	done := make(chan error, 1)
	go func() {
		for l := range r.lines {
			fmt.Fprintln(&r.out, l)
		}
		done <- r.cmd.Wait()
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("console exit after SIGTERM: %v\n%s", err, r.out.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("console did not stop within 20 s of SIGTERM")
	}
	return time.Since(signalled)
}

// startAndStop runs the binary until it serves, calls use with the printed
// token (if any), sends SIGTERM and returns stdout.
func startAndStop(t *testing.T, args []string, listen string, use func(token string)) string {
	t.Helper()
	r := start(t, args)
	if use != nil {
		use(tokenRE.FindString(r.out.String()))
	}
	r.stop(t)
	return r.out.String()
}

// TestBinarySIGTERMWithClient: SIGTERM stops a console on its embedded
// etcd promptly while an SDK client watches that etcd (the embedded etcd
// used to wait out the open watch stream: 8.7 s).
func TestBinarySIGTERMWithClient(t *testing.T) {
	args, _, etcdURL := embeddedArgs(t)
	r := start(t, args)
	ctx := context.Background()
	client, err := sdk.New(ctx, sdk.Config{Endpoints: []string{etcdURL}, App: "checkout", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := client.WaitReady(wctx); err != nil {
		t.Fatal(err)
	}
	took := r.stop(t)
	t.Logf("SIGTERM to exit with an SDK client watching: %v", took.Round(time.Millisecond))
	if took > 3*time.Second {
		t.Fatalf("SIGTERM took %v to stop the console; want well under 3s", took)
	}
}

// fails runs the console and expects the one-line start-up failure.
func fails(t *testing.T, args []string, env ...string) string {
	t.Helper()
	return bintest.Fails(t, bin, "console", args, env...)
}

// TestBinaryStartFailures: each start-up failure exits 1 with one line
// naming the cause and the setting to change (each used to panic).
func TestBinaryStartFailures(t *testing.T) {
	flagValue := func(args []string, name string) string {
		for i, a := range args {
			if a == name {
				return args[i+1]
			}
		}
		return ""
	}
	cases := []struct {
		name  string
		setup func(t *testing.T, args []string) []string // may hold a port or change args
		want  []string
	}{
		{"HTTP port taken", func(t *testing.T, args []string) []string {
			bintest.HoldPort(t, flagValue(args, "--listen"))
			return args
		}, []string{"address already in use", "--listen or SWITCHYARD_LISTEN"}},
		{"embedded etcd client port taken", func(t *testing.T, args []string) []string {
			bintest.HoldPort(t, flagValue(args, "--embedded-etcd-client-url"))
			return args
		}, []string{"address already in use", "--embedded-etcd-client-url or SWITCHYARD_EMBEDDED_ETCD_CLIENT_URL"}},
		{"embedded etcd peer port taken", func(t *testing.T, args []string) []string {
			bintest.HoldPort(t, flagValue(args, "--embedded-etcd-peer-url"))
			return args
		}, []string{"address already in use", "--embedded-etcd-peer-url or SWITCHYARD_EMBEDDED_ETCD_PEER_URL"}},
		{"database unreachable", func(t *testing.T, args []string) []string {
			return append(args, "--database-url", "postgres://postgres:s3cret@"+etcdtest.FreeAddr(t)+"/switchyard?sslmode=disable")
		}, []string{"connection refused", "--database-url or SWITCHYARD_DATABASE_URL"}},
		{"data dir unwritable", func(t *testing.T, args []string) []string {
			file := filepath.Join(t.TempDir(), "file")
			if err := os.WriteFile(file, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			return append(args, "--data-dir", filepath.Join(file, "data"))
		}, []string{"not a directory", "--data-dir or SWITCHYARD_DATA_DIR"}},
		{"bad configuration", func(t *testing.T, args []string) []string {
			return append(args, "--namespace", "Prod!")
		}, []string{"namespace"}},
		{"audit key file missing", func(t *testing.T, args []string) []string {
			return append(args, "--audit-key-file", filepath.Join(t.TempDir(), "nope.key"))
		}, []string{"nope.key", "--audit-key-file or SWITCHYARD_AUDIT_KEY_FILE"}},
		{"no checkpoints", func(t *testing.T, args []string) []string {
			return append(args, "--checkpoint-events", "0")
		}, []string{"--checkpoint-events or SWITCHYARD_CHECKPOINT_EVENTS"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args, _, _ := embeddedArgs(t)
			msg := fails(t, tc.setup(t, args))
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error lacks %q", w)
				}
			}
			if strings.Contains(msg, "s3cret") {
				t.Error("the error shows the database password")
			}
		})
	}
}

// TestBinarySecretFiles: the database URL comes from the file
// SWITCHYARD_DATABASE_URL_FILE names and the bootstrap token from
// --bootstrap-token-file, each without its trailing newline: the console
// runs on that Postgres database and the token works. A secret given both
// itself and as a file, or a file that cannot be read, fails the start in
// one line naming both settings (or the setting and the path), never the
// secret.
func TestBinarySecretFiles(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const token = "sy_from-a-file-0123456789"
	dbFile, tokenFile := file("database-url", pgtest.NewDatabase(t)+"\n"), file("bootstrap-token", token+"\n")
	t.Run("started", func(t *testing.T) {
		t.Setenv("SWITCHYARD_DATABASE_URL_FILE", dbFile)
		args, listen, _ := embeddedArgs(t)
		out := startAndStop(t, append(args, "--bootstrap-token-file", tokenFile), listen, func(string) {
			req, _ := http.NewRequest("POST", "http://"+listen+"/api/v1/apps/demo/switches",
				strings.NewReader(`{"name":"s","level":"L3","reason":"secret files"}`))
			req.Header.Set("Authorization", "Bearer "+token)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil || resp.StatusCode != 201 {
				t.Fatalf("create with the token from the file: %v %v", resp, err)
			}
			resp.Body.Close()
		})
		if !regexp.MustCompile(`database: +postgres://`).MatchString(out) || strings.Contains(out, "bootstrap admin token") {
			t.Errorf("want the console on Postgres with the file's token, none generated:\n%s", out)
		}
	})
	const pw = "s3cret-value-0123456789"
	pwURL := "postgres://u:" + pw + "@127.0.0.1:1/x"
	missing := filepath.Join(dir, "missing")
	for _, tc := range []struct {
		name string
		args []string
		env  []string
		want string
	}{
		{"both in the environment", nil, []string{"SWITCHYARD_BOOTSTRAP_TOKEN=" + pw, "SWITCHYARD_BOOTSTRAP_TOKEN_FILE=" + tokenFile},
			"console: SWITCHYARD_BOOTSTRAP_TOKEN and SWITCHYARD_BOOTSTRAP_TOKEN_FILE are both set: set one"},
		{"both on the command line", []string{"--database-url", pwURL, "--database-url-file", dbFile}, nil,
			"console: --database-url and --database-url-file are both given: give one (see console -h)"},
		{"unreadable file in the environment", nil, []string{"SWITCHYARD_DATABASE_URL_FILE=" + missing},
			"console: SWITCHYARD_DATABASE_URL_FILE: open " + missing + ": no such file or directory"},
		{"unreadable file on the command line", []string{"--prometheus-token-file", missing}, nil,
			`console: invalid value "` + missing + `" for flag -prometheus-token-file: no such file or directory (see console -h)`},
		{"empty file", nil, []string{"SWITCHYARD_ETCD_PASSWORD_FILE=" + file("empty", "\n")},
			"console: SWITCHYARD_ETCD_PASSWORD_FILE: " + filepath.Join(dir, "empty") + " is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args, _, _ := embeddedArgs(t)
			msg := fails(t, append(args, tc.args...), tc.env...)
			if msg != tc.want {
				t.Errorf("got  %s\nwant %s", msg, tc.want)
			}
			if strings.Contains(msg, pw) {
				t.Error("the error shows the secret")
			}
		})
	}
}

// TestBinarySecondConsole: a second `console` with the same flags, or the
// same data dir, on one host fails with one line naming the setting, and
// the first keeps serving.
func TestBinarySecondConsole(t *testing.T) {
	args, listen, _ := embeddedArgs(t)
	first := start(t, args)
	if msg := fails(t, args); !strings.Contains(msg, "--listen or SWITCHYARD_LISTEN") {
		t.Errorf("error does not name --listen: %s", msg)
	}
	// On other ports but in the same data dir (it used to hang, deaf to
	// SIGTERM, on the embedded etcd's file lock).
	other, _, _ := embeddedArgs(t)
	other[1] = args[1]
	if msg := fails(t, other); !strings.Contains(msg, "in use by another console") || !strings.Contains(msg, "--data-dir or SWITCHYARD_DATA_DIR") {
		t.Errorf("error does not name --data-dir: %s", msg)
	}
	resp, err := http.Get("http://" + listen + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("the first console after the second failed: %v %v", resp, err)
	}
	resp.Body.Close()
	first.stop(t)
}

// help runs the binary with args and expects exit 0 and help on stdout.
func help(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr strings.Builder
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("console %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	if stderr.Len() > 0 {
		t.Errorf("console %s wrote to stderr: %s", strings.Join(args, " "), stderr.String())
	}
	return stdout.String()
}

// TestHelp: -h exits 0 and lists every flag, every SWITCHYARD_* variable
// the console reads and the audit commands; audit -h lists the audit flags.
func TestHelp(t *testing.T) {
	out := help(t, "-h")
	cfg := console.DefaultConfig()
	var vars []string
	_ = cfg.LoadEnv(func(name string) string { vars = append(vars, name); return "" })
	if len(vars) < 10 {
		t.Fatalf("LoadEnv read only %v", vars)
	}
	fs := flag.NewFlagSet("console", flag.ContinueOnError)
	cfg.AddFlags(fs)
	var want []string
	want = append(want, vars...)
	fs.VisitAll(func(f *flag.Flag) { want = append(want, "--"+f.Name+" ") })
	want = append(want, "console audit verify", "console audit export", "console audit witness")
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("console -h lacks %q", w)
		}
	}
	if t.Failed() {
		t.Logf("console -h:\n%s", out)
	}
	if out := help(t, "--help"); !strings.Contains(out, "--listen") {
		t.Errorf("console --help:\n%s", out)
	}
	for _, args := range [][]string{{"audit", "-h"}, {"audit", "verify", "-h"}, {"audit", "export", "--help"}} {
		out := help(t, args...)
		for _, w := range []string{"verify", "export", "witness", "--database-url", "--data-dir", "--format", "SWITCHYARD_DATABASE_URL", "--url", "--state", "--key", "--token-file"} {
			if !strings.Contains(out, w) {
				t.Errorf("console %s lacks %q:\n%s", strings.Join(args, " "), w, out)
			}
		}
	}
}

// TestUsageErrors: a mistyped flag, an unknown audit command or a stray
// argument is one line pointing at help, exit 1.
func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--lisen", "x"}, "see console -h"},
		{[]string{"serve"}, `unexpected argument "serve"`},
		{[]string{"audit"}, "verify, export or witness"},
		{[]string{"audit", "witness", "--url", "http://127.0.0.1:1"}, "--url, --state and --key are required"},
		{[]string{"audit", "verfiy"}, `unknown command "verfiy"`},
		{[]string{"audit", "export", "--bogus"}, "see console audit -h"},
	} {
		if msg := fails(t, tc.args); !strings.Contains(msg, tc.want) {
			t.Errorf("console %s: %q lacks %q", strings.Join(tc.args, " "), msg, tc.want)
		}
	}
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

// TestBinaryWitness: a console on its embedded defaults generates its
// audit signing key and signs a checkpoint; `audit witness` with its public
// key accepts it (exit 0) and, given another key, refuses with one line
// (exit 1); the bundle export verifies offline with the key.
func TestBinaryWitness(t *testing.T) {
	args, listen, _ := embeddedArgs(t)
	data := args[1]
	r := start(t, args)
	token := tokenRE.FindString(r.out.String())
	req, _ := http.NewRequest("POST", "http://"+listen+"/api/v1/apps/demo/switches", strings.NewReader(`{"name":"s","level":"L3","reason":"smoke"}`))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 201 {
		t.Fatalf("create: %v %v", resp, err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		req, _ := http.NewRequest("GET", "http://"+listen+"/api/v1/audit/checkpoint", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 && strings.Contains(string(body), "\n2\n") {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no checkpoint of 2 events")
		}
		time.Sleep(100 * time.Millisecond)
	}
	pub, err := os.ReadFile(filepath.Join(data, "audit-signing.key.pub"))
	if err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(t.TempDir(), "state")
	witness := []string{"audit", "witness", "--url", "http://" + listen, "--state", state}
	cmd := exec.Command(bin, append(witness, "--key", strings.TrimSpace(string(pub)))...)
	cmd.Env = append(os.Environ(), "SWITCHYARD_TOKEN="+token)
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "first checkpoint of switchyard/default/audit kept: 2 events") {
		t.Fatalf("witness: %v\n%s", err, out)
	}
	_, other, err := note.GenerateKey(rand.Reader, "switchyard/default/audit")
	if err != nil {
		t.Fatal(err)
	}
	if msg := fails(t, append(witness, "--key", other), "SWITCHYARD_TOKEN="+token); !strings.Contains(msg, "signature: the checkpoint is not signed by a trusted key") {
		t.Fatalf("witness with another key: %s", msg)
	}
	r.stop(t)
	bundle, err := exec.Command(bin, "audit", "export", "--format", "bundle", "--data-dir", data).Output()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "audit.bundle")
	if err := os.WriteFile(file, bundle, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "audit", "verify", "--bundle", file, "--key", strings.TrimSpace(string(pub))).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "audit chain ok: 2 events") || !strings.Contains(string(out), "checkpoints match") {
		t.Fatalf("verify --bundle: %v\n%s", err, out)
	}
}
