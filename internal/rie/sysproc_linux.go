package rie

import "syscall"

// sysProcAttr puts the emulator in a process group of its own and has the
// kernel kill it if the test process dies without running its cleanups
// (a go test timeout, a signal); the function then loses its Runtime API
// and exits too, unless stuck in a handler.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
