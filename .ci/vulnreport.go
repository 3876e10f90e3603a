//go:build ignore

// vulnreport reads govulncheck's JSON stream (-format json) on stdin and
// prints the vulnerabilities the code calls, split in two: those in
// modules (a dependency of this repository, which it can upgrade), and
// those in the standard library or toolchain (which depend on the Go
// installed on the machine running the check). It exits 1 if the code
// calls a vulnerable symbol of a module, 0 otherwise: standard-library
// findings are printed, not failed. Imported-but-not-called and
// required-but-not-imported vulnerabilities are counted, not failed.
//
// Usage: govulncheck -format json ./... | go run .ci/vulnreport.go
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

type frame struct {
	Module   string `json:"module"`
	Version  string `json:"version"`
	Package  string `json:"package"`
	Function string `json:"function"`
	Receiver string `json:"receiver"`
	Position *struct {
		Filename string `json:"filename"`
		Line     int    `json:"line"`
	} `json:"position"`
}

type message struct {
	Config *struct {
		ScannerVersion string `json:"scanner_version"`
		DB             string `json:"db"`
		GoVersion      string `json:"go_version"`
		ScanLevel      string `json:"scan_level"`
	} `json:"config"`
	OSV *struct {
		ID      string `json:"id"`
		Summary string `json:"summary"`
	} `json:"osv"`
	Finding *struct {
		OSV          string   `json:"osv"`
		FixedVersion string   `json:"fixed_version"`
		Trace        []*frame `json:"trace"`
	} `json:"finding"`
}

// vuln is one vulnerability the code calls.
type vuln struct {
	id, module, version, fixed string
	calls                      map[string]bool // "entry point → vulnerable symbol"
}

func symbol(f *frame) string {
	s := f.Package + "."
	if f.Receiver != "" {
		s += strings.TrimPrefix(f.Receiver, "*") + "."
	}
	return s + f.Function
}

func main() {
	if err := run(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "vulnreport:", err)
		os.Exit(1)
	}
}

var (
	errModuleVulns = errors.New("the code calls vulnerable symbols of modules")
	errStdVulns    = errors.New("the code calls vulnerable symbols of the standard library")
)

func run(in io.Reader, out io.Writer) error {
	dec := json.NewDecoder(in)
	summaries := map[string]string{}
	called := map[string]*vuln{}
	notCalled := map[string]bool{} // found at module or package level only
	sawConfig := false
	for {
		var m message
		if err := dec.Decode(&m); err == io.EOF {
			break
		} else if err != nil {
			return fmt.Errorf("reading govulncheck's JSON: %w", err)
		}
		switch {
		case m.Config != nil:
			sawConfig = true
			c := m.Config
			if c.ScanLevel != "" && c.ScanLevel != "symbol" {
				return fmt.Errorf("scan level %q: want symbol, to tell called from imported", c.ScanLevel)
			}
			fmt.Fprintf(out, "govulncheck %s, database %s, %s\n", c.ScannerVersion, c.DB, c.GoVersion)
		case m.OSV != nil:
			summaries[m.OSV.ID] = m.OSV.Summary
		case m.Finding != nil && len(m.Finding.Trace) > 0:
			f := m.Finding
			top := f.Trace[0]
			if top.Function == "" {
				notCalled[f.OSV] = true
				continue
			}
			v := called[f.OSV]
			if v == nil {
				v = &vuln{id: f.OSV, module: top.Module, version: top.Version, fixed: f.FixedVersion, calls: map[string]bool{}}
				called[f.OSV] = v
			}
			entry := f.Trace[len(f.Trace)-1]
			where := symbol(entry)
			if entry.Position != nil {
				where = fmt.Sprintf("%s (%s:%d)", where, entry.Position.Filename, entry.Position.Line)
			}
			v.calls[where+" → "+symbol(top)] = true
		}
	}
	if !sawConfig {
		return errors.New("no govulncheck output (did it run?)")
	}
	var mods, std []*vuln
	for id, v := range called {
		delete(notCalled, id)
		if v.module == "stdlib" || v.module == "toolchain" {
			std = append(std, v)
		} else {
			mods = append(mods, v)
		}
	}
	show := func(title string, vs []*vuln, paths int) {
		sort.Slice(vs, func(i, j int) bool { return vs[i].id < vs[j].id })
		fmt.Fprintf(out, "%s: %d\n", title, len(vs))
		for _, v := range vs {
			fixed := v.fixed
			if fixed == "" {
				fixed = "no fix yet"
			}
			fmt.Fprintf(out, "  %s  %s@%s (fixed in %s): %s\n", v.id, v.module, v.version, fixed, summaries[v.id])
			calls := make([]string, 0, len(v.calls))
			for c := range v.calls {
				calls = append(calls, c)
			}
			sort.Strings(calls)
			for i, c := range calls {
				if i == paths {
					fmt.Fprintf(out, "      ... and %d more call paths\n", len(calls)-paths)
					break
				}
				fmt.Fprintf(out, "      %s\n", c)
			}
		}
	}
	unfixed, err := readUnfixed(os.Getenv("PAGPOLAR_VULN_UNFIXED"))
	if err != nil {
		return err
	}
	var stdFail, stdNamed []*vuln
	for _, v := range std {
		if unfixed[v.id] {
			stdNamed = append(stdNamed, v)
		} else {
			stdFail = append(stdFail, v)
		}
	}
	show("vulnerabilities the code calls in modules (fail)", mods, 3)
	show("vulnerabilities the code calls in the standard library of this Go (fail: run the check with a Go that fixes them)", stdFail, 1)
	show("vulnerabilities the code calls in the standard library that no Go served here fixes (named in the README; printed, not failed)", stdNamed, 1)
	fmt.Fprintf(out, "vulnerabilities in required modules or imported packages that the code does not call: %d\n", len(notCalled))
	if len(mods) > 0 {
		return fmt.Errorf("%w: %d (upgrade the modules above)", errModuleVulns, len(mods))
	}
	if len(stdFail) > 0 {
		return fmt.Errorf("%w: %d (use a Go release that fixes them, or name them in the unfixed list if none served does)", errStdVulns, len(stdFail))
	}
	return nil
}

// readUnfixed reads the IDs of standard-library vulnerabilities that no
// toolchain served here fixes: one per line, the ID first ("#" comments).
func readUnfixed(path string) (map[string]bool, error) {
	ids := map[string]bool{}
	if path == "" {
		return ids, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 0 && !strings.HasPrefix(f[0], "#") {
			ids[f[0]] = true
		}
	}
	return ids, nil
}
