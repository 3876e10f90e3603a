//go:build ignore

// testtimes reads `go test -json` streams (files named on the command
// line) and prints, for CI's log: each package's result and time, the
// output of every failed test, and the slowest 30 top-level tests. It
// exits 1 if a package or test failed (a build failure, too), else 0.
//
// Usage: go run .ci/testtimes.go LEG FILE...
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
)

type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

// printUnfinished prints, for a failed package, the output of its tests
// that never ended: a test binary stopped by -timeout (or a crash) sends no
// result for the tests still running, and the panic that names them and
// the goroutines' stacks are attributed to the last test that ran. Each is
// cut to its last lines; its entries are removed.
func printUnfinished(output map[string][]string, pkg string) {
	const keep = 400
	var ids []string
	for id := range output {
		if strings.HasPrefix(id, pkg+" ") && id != pkg+" " {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		lines := output[id]
		from, to := 0, len(lines)
		// A panic (the timeout's names the tests still running) is kept
		// with the lines before it and the start of the stacks after it.
		for i, l := range lines {
			if strings.HasPrefix(l, "panic: ") {
				from, to = max(0, i-keep/4), min(len(lines), i+keep*3/4)
				break
			}
		}
		if to-from > keep {
			from = to - keep
		}
		fmt.Printf("--- output of %s, which never ended (lines %d-%d of %d)\n", id, from+1, to, len(lines))
		fmt.Print(strings.Join(lines[from:to], ""))
		delete(output, id)
	}
}

type result struct {
	pkg, test, action string
	elapsed           float64
}

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: go run .ci/testtimes.go LEG FILE...")
		os.Exit(2)
	}
	leg := os.Args[1]
	const module = "github.com/pagpolar/pagpolar-go"
	var pkgs, tests []result
	output := map[string][]string{} // package/test → its output lines
	failed := false
	for _, name := range os.Args[2:] {
		f, err := os.Open(name)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			var e event
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				// A build failure is printed as text, not JSON.
				fmt.Println(sc.Text())
				if strings.Contains(sc.Text(), "FAIL") || strings.Contains(sc.Text(), "build failed") {
					failed = true
				}
				continue
			}
			p := strings.Replace(e.Package, module, ".", 1)
			id := p + " " + e.Test
			switch e.Action {
			case "output":
				output[id] = append(output[id], e.Output)
			case "build-output":
				fmt.Print(e.Output)
			case "build-fail":
				failed = true
			case "pass", "fail", "skip":
				r := result{pkg: p, test: e.Test, action: e.Action, elapsed: e.Elapsed}
				if e.Test == "" {
					pkgs = append(pkgs, r)
				} else if !strings.Contains(e.Test, "/") {
					tests = append(tests, r)
				}
				if e.Action == "fail" {
					failed = true
					if e.Test != "" || len(output[id]) > 0 {
						fmt.Printf("--- output of the failed %s\n%s", id, strings.Join(output[id], ""))
					}
					if e.Test == "" {
						printUnfinished(output, p)
					}
				}
				delete(output, id)
			}
		}
		f.Close()
	}
	sort.Slice(pkgs, func(i, j int) bool { return pkgs[i].elapsed > pkgs[j].elapsed })
	fmt.Printf("== %s: packages, slowest first (seconds; packages run in parallel)\n", leg)
	for _, r := range pkgs {
		fmt.Printf("   %8.1f  %-4s %s\n", r.elapsed, r.action, r.pkg)
	}
	sort.Slice(tests, func(i, j int) bool { return tests[i].elapsed > tests[j].elapsed })
	if len(tests) > 30 {
		tests = tests[:30]
	}
	fmt.Printf("== %s: the 30 slowest tests (seconds)\n", leg)
	for _, r := range tests {
		fmt.Printf("   %8.1f  %-4s %s %s\n", r.elapsed, r.action, r.pkg, r.test)
	}
	if failed {
		os.Exit(1)
	}
}
