package sluice_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The package doc names every package of the core module outside
// examples/, so that a new package cannot go undescribed.
func TestDocNamesEveryPackage(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if name := d.Name(); path != "." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "examples") {
			return filepath.SkipDir
		}
		files, err := filepath.Glob(filepath.Join(path, "*.go"))
		if err != nil || path == "." {
			return err
		}
		for _, f := range files {
			if !strings.HasSuffix(f, "_test.go") {
				if !strings.Contains(string(doc), filepath.ToSlash(path)) {
					t.Errorf("doc.go does not name package %s", filepath.ToSlash(path))
				}
				break
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
