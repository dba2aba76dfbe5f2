//go:build !unix

package providers

// openFileLimit is 0: no limit this package can read.
func openFileLimit() uint64 { return 0 }
