//go:build race

package faults_test

// raceEnabled tells TestMain to build the gateway binary with -race too.
const raceEnabled = true
