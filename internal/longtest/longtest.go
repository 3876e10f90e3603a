package longtest

import (
	"os"
	"testing"
)

// Env is the variable that turns the long tests on ("1").
const Env = "PAGPOLAR_LONG"

// Enabled reports whether the long tests run.
func Enabled() bool { return os.Getenv(Env) == "1" }

// Skip skips t unless the long tests run, saying how to run it.
func Skip(t testing.TB) {
	t.Helper()
	if !Enabled() {
		t.Skip("long test: run with " + Env + "=1 (as .ci/run does)")
	}
}
