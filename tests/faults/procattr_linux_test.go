package faults_test

import "syscall"

// childAttr makes a child process die with the test binary, so that a test
// killed mid-way leaves no redis-server or gateway behind.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
