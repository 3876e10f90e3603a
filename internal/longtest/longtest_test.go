package longtest

import "testing"

func TestEnabledOnlyWithOne(t *testing.T) {
	for v, want := range map[string]bool{"": false, "0": false, "yes": false, "1": true} {
		t.Setenv(Env, v)
		if got := Enabled(); got != want {
			t.Errorf("%s=%q: Enabled() = %v, want %v", Env, v, got, want)
		}
	}
}

func TestSkipSkipsUnlessEnabled(t *testing.T) {
	t.Setenv(Env, "")
	ran := false
	t.Run("short", func(t *testing.T) {
		Skip(t)
		ran = true
	})
	if ran {
		t.Fatal("a long test ran without " + Env + "=1")
	}
	t.Setenv(Env, "1")
	t.Run("long", func(t *testing.T) {
		Skip(t)
		ran = true
	})
	if !ran {
		t.Fatal("a long test was skipped with " + Env + "=1")
	}
}
