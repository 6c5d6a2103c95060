package console_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/switchyard-io/switchyard/internal/etcdtest"
	"github.com/switchyard-io/switchyard/server/console"
	"github.com/switchyard-io/switchyard/server/lead"
)

// childEnv makes the test binary run one console instead of the tests.
const childEnv = "SWITCHYARD_TEST_CHILD_CONSOLE"

// TestMain checks that no test leaks a goroutine (except in the soak run),
// and runs a console as a child process for the tests that kill one and
// for the soak (see startProcess).
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		runChild()
	}
	if os.Getenv("SWITCHYARD_SOAK") != "" {
		// The soak's consoles run in child processes (their goroutines are
		// what it reports); the in-process three-member etcd leaves server
		// goroutines of its members' connections behind after Close, which
		// are not the console's.
		os.Exit(m.Run())
	}
	goleak.VerifyTestMain(m, etcdtest.LeakOptions()...)
}

// runChild runs a console configured by the SWITCHYARD_* environment,
// prints its URL and serves until the process is killed.
func runChild() {
	cfg := console.DefaultConfig()
	if err := cfg.FromEnv(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var opts []console.Option
	if os.Getenv(childJobEnv) != "" {
		opts = append(opts, console.WithJob(func(c *console.Console) lead.Job {
			return &stepsJob{svc: c.Service, hold: os.Getenv(childJobEnv) == "hold"}
		}))
	}
	c, err := console.Start(context.Background(), cfg, nil, opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Println(c.URL())
	if dir := os.Getenv(soakProfilesEnv); dir != "" {
		writeHeapProfiles(dir, cfg.ConsoleID)
	}
	select {}
}

// soakProfilesEnv names a directory where each soak console writes its
// heap profile every minute (<console id>-heap-<minute>.pprof), to find
// what grows: go tool pprof -diff_base soak-0-heap-01.pprof soak-0-heap-09.pprof.
const soakProfilesEnv = "SWITCHYARD_SOAK_PROFILES"

// writeHeapProfiles writes the process's heap profile into dir every
// minute, until the process ends.
func writeHeapProfiles(dir, id string) {
	for minute := 1; ; minute++ {
		time.Sleep(time.Minute)
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s-heap-%02d.pprof", id, minute)))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return
		}
		runtime.GC() // the profile shows what is live now
		err = pprof.WriteHeapProfile(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return
		}
	}
}

// process is a console running in a child process.
type process struct {
	cmd   *exec.Cmd
	url   string
	lines chan string   // what it prints after its URL
	dead  chan struct{} // closed once the process has exited
}

// startProcess runs a console in a child process against the env, with
// the given console id and extra NAME=value environment (which wins over
// the env's settings); it is killed when the test ends.
func (e *env) startProcess(id string, env ...string) *process {
	e.t.Helper()
	endpoints := e.endpoints
	if endpoints == "" {
		endpoints = e.etcd.Endpoint
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), childEnv+"=1",
		"SWITCHYARD_LISTEN=127.0.0.1:0",
		"SWITCHYARD_DATA_DIR="+e.t.TempDir(),
		"SWITCHYARD_DATABASE_URL="+e.pgURL,
		"SWITCHYARD_ETCD_ENDPOINTS="+endpoints,
		"SWITCHYARD_BOOTSTRAP_TOKEN="+adminToken,
		"SWITCHYARD_CONSOLE_ID="+id,
		"SWITCHYARD_RECONCILE_INTERVAL=500ms",
		"SWITCHYARD_EGRESS_ALLOW="+strings.Join(e.egressAllow, ","),
	), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		e.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	p := &process{cmd: cmd, lines: make(chan string, 16), dead: make(chan struct{})}
	urls := make(chan string, 1)
	go func() {
		out := bufio.NewReader(stdout)
		if line, err := out.ReadString('\n'); err == nil {
			urls <- strings.TrimSpace(line)
		}
		for {
			line, err := out.ReadString('\n')
			if err != nil {
				break
			}
			select {
			case p.lines <- strings.TrimSpace(line):
			default:
			}
		}
		_, _ = io.Copy(io.Discard, out)
		_ = cmd.Wait()
		close(p.dead)
	}()
	e.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.dead
	})
	select {
	case p.url = <-urls:
	case <-p.dead:
		e.t.Fatalf("console %s exited at start: %s", id, stderr.String())
	case <-time.After(30 * time.Second):
		e.t.Fatalf("console %s did not start in 30s", id)
	}
	return p
}

// waitLine waits until the process prints line.
func (p *process) waitLine(t testing.TB, line string, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case got := <-p.lines:
			if got == line {
				return
			}
		case <-p.dead:
			t.Fatalf("the process exited before printing %q", line)
		case <-deadline:
			t.Fatalf("the process did not print %q within %v", line, within)
		}
	}
}

// kill SIGKILLs the process and returns once it is gone: it dies without
// resigning, exactly like a crash.
func (p *process) kill(t testing.TB) time.Time {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.dead
	return time.Now()
}
