// Package repocheck checks the repository's own tooling: what the README
// and the Makefile promise exists.
package repocheck

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// root is the repository's root directory.
func root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// targets reads a Makefile's .PHONY list and the targets it defines.
func targets(t *testing.T, path string) (phony []string, defined map[string]string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rule := regexp.MustCompile(`^([A-Za-z0-9_-]+):`)
	defined = map[string]string{}
	var current string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, ".PHONY:"); ok {
			phony = append(phony, strings.Fields(rest)...)
			continue
		}
		if m := rule.FindStringSubmatch(line); m != nil {
			current = m[1]
			defined[current] = ""
			continue
		}
		if strings.HasPrefix(line, "\t") && current != "" {
			defined[current] += strings.TrimSpace(line) + "\n"
		} else if line == "" || !strings.HasPrefix(line, "#") {
			current = ""
		}
	}
	return phony, defined
}

// TestMakefileTargetsExist fails when the Makefile lists a target it does
// not define (make would answer "Nothing to be done" or "No rule").
func TestMakefileTargetsExist(t *testing.T) {
	phony, defined := targets(t, filepath.Join(root(), "Makefile"))
	for _, p := range phony {
		if _, ok := defined[p]; !ok {
			t.Errorf("Makefile: .PHONY lists %q, which has no rule", p)
		}
	}
	// The soak is the fault suite's soak test, under the race detector.
	if got := defined["soak"]; !strings.Contains(got, "SWITCHBOARD_SOAK=1") || !strings.Contains(got, "-run Soak") ||
		!strings.Contains(got, "-race") || !strings.Contains(got, "./tests/faults/") {
		t.Errorf("make soak runs %q, not the soak test of tests/faults", got)
	}
}
