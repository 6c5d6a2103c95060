package signal_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependencies keeps the metric sources free of the console: no gin,
// gorm, etcd or other server package, so any job can use them. Leaves of
// the standard library only (the one-line text cleaner) are fine.
func TestDependencies(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	out, err := exec.Command("go", "list", "-deps", "github.com/switchyard-io/switchyard/server/signal").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	allowed := map[string]bool{
		"github.com/switchyard-io/switchyard/server/signal":    true,
		"github.com/switchyard-io/switchyard/internal/oneline": true,
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, bad := range []string{"github.com/gin-gonic/", "gorm.io/", "go.etcd.io/", "github.com/switchyard-io/switchyard/"} {
			if strings.HasPrefix(dep, bad) && !allowed[dep] {
				t.Errorf("server/signal depends on %s", dep)
			}
		}
	}
}
