package signal_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every request, server and Prometheus process a test starts ends with it.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
