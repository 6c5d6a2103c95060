package limit_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestDependencies proves sdk/limit and sdk/retry depend only on the standard
// library, sdk/wire and each other.
func TestDependencies(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	allowed := map[string]bool{
		"github.com/switchyard-io/switchyard/sdk/wire":  true,
		"github.com/switchyard-io/switchyard/sdk/limit": true,
		"github.com/switchyard-io/switchyard/sdk/retry": true,
	}
	out, err := exec.Command("go", "list", "-deps", "github.com/switchyard-io/switchyard/sdk/limit", "github.com/switchyard-io/switchyard/sdk/retry").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		first, _, _ := strings.Cut(pkg, "/")
		if !allowed[pkg] && strings.Contains(first, ".") {
			t.Errorf("forbidden dependency %s", pkg)
		}
	}
}
