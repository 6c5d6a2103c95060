package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchyard-io/switchyard/internal/agent"
	"github.com/switchyard-io/switchyard/internal/doctest"
	"github.com/switchyard-io/switchyard/internal/etcdtest"
	"github.com/switchyard-io/switchyard/sdk"
	"github.com/switchyard-io/switchyard/server/console"
)

// docsToken is the bootstrap admin token of TestRunnableDocs' console; the
// docs' "sy_..." placeholder stands for it.
const docsToken = "sy_docs-test-bootstrap-token"

// TestRunnableDocs runs every shell block of README.md and docs/*.md marked
// runnable (see internal/doctest), in that order, against one console on
// its embedded defaults (embedded etcd and SQLite, as `go run
// ./cmd/console` starts it) and one demo, on free ports, and compares each
// command's output with the output the docs show. The docs' addresses
// 127.0.0.1:8080 and 127.0.0.1:8070 are replaced by the test's; API and
// TOKEN are set as the README tells the reader to. A command the docs
// show without output must not be answered with a problem document. A
// change reaches the
// demo within milliseconds, not at once: a command whose output differs is
// run again for up to 5 s before the test fails.
func TestRunnableDocs(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skip("the docs' commands need curl")
	}
	root, _ := filepath.Abs(filepath.Join("..", ".."))
	files, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	files = append([]string{filepath.Join(root, "README.md")}, files...)
	var cmds []doctest.Command
	for _, f := range files {
		rel, _ := filepath.Rel(root, f)
		c, err := doctest.Extract(f, rel)
		if err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, c...)
	}
	if len(cmds) == 0 {
		t.Fatal("no runnable block in README.md or docs/")
	}

	cfg := console.DefaultConfig()
	cfg.Listen, cfg.DataDir, cfg.BootstrapToken = "127.0.0.1:0", t.TempDir(), docsToken
	cfg.EmbeddedEtcdURL, cfg.EmbeddedEtcdPeer = "http://"+etcdtest.FreeAddr(t), "http://"+etcdtest.FreeAddr(t)
	con, err := console.Start(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = con.Shutdown(ctx)
	})
	demo := startDemo(t, cfg.EmbeddedEtcdURL)

	sh := startShell(t, root, "API="+con.URL()+"/api/v1", "TOKEN="+docsToken)
	addrs := []string{"127.0.0.1:8080", con.Addr(), "127.0.0.1:8070", demo, "sy_...", docsToken}
	rewrite := strings.NewReplacer(addrs...)
	// Some docs need a process besides the console and the demo: it runs
	// while their commands do, and its addresses replace theirs.
	besides := map[string]func(*testing.T, string) (addrs []string, stop func()){"docs/agent.md": startAgent}
	var (
		file string
		stop = func() {}
	)
	defer func() { stop() }()
	for _, c := range cmds {
		if c.File != file {
			stop()
			file, stop, rewrite = c.File, func() {}, strings.NewReplacer(addrs...)
			if start := besides[file]; start != nil {
				var more []string
				more, stop = start(t, cfg.EmbeddedEtcdURL)
				rewrite = strings.NewReplacer(append(more, addrs...)...)
			}
		}
		text := rewrite.Replace(c.Text)
		out, status := sh.run(t, text)
		if status != 0 {
			t.Fatalf("%s: exit status %d:\n%s\n%s", c, status, c.Text, out)
		}
		if c.Expect == nil {
			// curl exits 0 on a 4xx: a refused request shows in its answer.
			if strings.Contains(out, `"type":"/problems/`) {
				t.Fatalf("%s: the console refused a command the docs show without output:\n%s\n%s", c, c.Text, out)
			}
			continue
		}
		err := doctest.Match(c.Expect, out)
		for deadline := time.Now().Add(5 * time.Second); err != nil && time.Now().Before(deadline); {
			time.Sleep(100 * time.Millisecond)
			out, _ = sh.run(t, text)
			err = doctest.Match(c.Expect, out)
		}
		if err != nil {
			t.Fatalf("%s: %s\n%v", c, c.Text, err)
		}
	}
	t.Logf("%d documented commands ran as documented", len(cmds))
}

// startDemo serves the demo on a free port, watching the console's
// embedded etcd as app checkout; it returns the demo's address.
func startDemo(t *testing.T, etcdURL string) string {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	client, err := sdk.New(ctx, sdk.Config{Endpoints: []string{etcdURL}, App: "checkout", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if err := client.WaitReady(wctx); err != nil {
		t.Fatal(err)
	}
	s := newShop(client, slog.New(slog.DiscardHandler))
	go s.run(ctx)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// startAgent runs the agent of docs/agent.md's quickstart — app checkout,
// instance agent-1, labels kind=agent, on the console's embedded etcd — on
// free ports, and returns the replacements of the docs' agent addresses
// and how to stop it (its instance key goes with it).
func startAgent(t *testing.T, etcdURL string) ([]string, func()) {
	cfg := agent.DefaultConfig()
	cfg.EtcdEndpoints, cfg.App, cfg.InstanceID, cfg.SnapshotDir = []string{etcdURL}, "checkout", "agent-1", t.TempDir()
	cfg.Labels = map[string]string{"kind": "agent"}
	ctx, cancel := context.WithCancel(context.Background())
	a, err := agent.New(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if err := a.Client().WaitReady(wctx); err != nil {
		t.Fatal(err)
	}
	var servers []*http.Server
	var out []string
	for _, h := range []struct {
		doc     string
		handler http.Handler
	}{{"localhost:8090", a.Handler()}, {"localhost:8016", a.OFREPHandler()}} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: h.handler, ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		servers = append(servers, srv)
		out = append(out, h.doc, ln.Addr().String())
	}
	return out, func() {
		for _, srv := range servers {
			_ = srv.Close()
		}
		a.Close()
		cancel()
	}
}

// shell is one bash process the docs' commands run in, one after another,
// so that what one sets (export TOKEN=…) the next sees.
type shell struct {
	in    io.Writer
	lines chan string
	n     int
}

func startShell(t *testing.T, dir string, env ...string) *shell {
	cmd := exec.Command("bash", "--noprofile", "--norc", "-s")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		in.Close()
		_ = cmd.Wait()
	})
	s := &shell{in: in, lines: make(chan string, 64)}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 4<<20)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
		close(s.lines)
	}()
	fmt.Fprintln(in, "exec 2>&1")
	return s
}

// run runs text and returns what it printed and its exit status.
func (s *shell) run(t *testing.T, text string) (string, int) {
	t.Helper()
	s.n++
	marker := fmt.Sprintf("@@doctest-%d@@", s.n)
	fmt.Fprintf(s.in, "%s\nprintf '\\n%s %%d\\n' $?\n", text, marker)
	var out strings.Builder
	timeout := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-s.lines:
			if !ok {
				t.Fatalf("the shell ended while running:\n%s\n%s", text, out.String())
			}
			if rest, found := strings.CutPrefix(l, marker+" "); found {
				var status int
				fmt.Sscan(rest, &status)
				return out.String(), status
			}
			out.WriteString(l + "\n")
		case <-timeout:
			t.Fatalf("no answer within 30 s:\n%s\n%s", text, out.String())
		}
	}
}
