//go:build !linux

package faults_test

import "syscall"

// childAttr is the default: only Linux can tie a child's life to ours.
func childAttr() *syscall.SysProcAttr { return nil }
