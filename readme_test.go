package pagpolar

import (
	"os"
	osexec "os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeQuickStartCompiles builds the README's quick start as written,
// in a scratch module that uses this checkout of the SDK.
func TestReadmeQuickStartCompiles(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds a program")
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)## Quick start.*?```go\n(.*?)```").FindSubmatch(readme)
	if m == nil || !strings.Contains(string(m[1]), "package main") {
		t.Fatal("no quick start program in README.md")
	}
	root, _ := filepath.Abs(".")
	dir := t.TempDir()
	goMod := "module quickstart\n\ngo 1.26\n\nrequire github.com/pagpolar/pagpolar-go v0.0.0\n\nreplace github.com/pagpolar/pagpolar-go => " + root + "\n"
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(goMod), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "main.go"), m[1], 0o644); err != nil {
		t.Fatal(err)
	}
	sum, _ := os.ReadFile("go.sum")
	if err := os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"mod", "tidy"}, {"vet", "."}, {"build", "-o", os.DevNull, "."}} {
		cmd := osexec.Command("go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}
