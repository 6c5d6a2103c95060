package promtest

import "syscall"

// sysProcAttr kills Prometheus if the test binary dies without cleanup
// (a panic, a -timeout), so no process outlives the test run.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
