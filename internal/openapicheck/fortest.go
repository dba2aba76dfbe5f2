package openapicheck

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// loaded is the process's Checker: the description is 3 MB, so every
// test of a process shares one compilation.
var loaded struct {
	once sync.Once
	c    *Checker
	err  error
}

// ForTest returns the process's Checker, loading it on first use. When the
// description is missing the test fails under CI=true (CI must never pass
// by skipping a judge) and otherwise gets nil after a log line, so a
// checkout without ../shared still runs its tests; a description that does
// not compile always fails.
func ForTest(t testing.TB) *Checker {
	t.Helper()
	loaded.once.Do(func() {
		p, err := SpecPath()
		if err != nil {
			loaded.err = err
			return
		}
		loaded.c, loaded.err = Load(p)
		if loaded.err == nil {
			loaded.c.open, loaded.err = LoadOpenResponses(filepath.Join(filepath.Dir(p), openResponsesFile))
		}
	})
	if loaded.err != nil {
		if !errors.Is(loaded.err, ErrNoSpec) || os.Getenv("CI") == "true" {
			t.Fatalf("the published schema cannot judge this test (CI=true): %v", loaded.err)
		}
		t.Logf("replies are not checked against the published schema: %v", loaded.err)
		return nil
	}
	return loaded.c
}
