//go:build !linux

package rie

import "syscall"

// sysProcAttr puts the emulator in a process group of its own.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
