package config

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse feeds Parse arbitrary bytes: it must never panic, every
// problem it reports has a line and a column, and what it accepts
// flowcontrol.New must accept too, behind the gate a binary builds for it.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.yaml")
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range []string{
		"",
		"controller: {bands: [{priority: 1, fallbackPriority: 1}]}",
		"controller: {neverPromote: true, bands: [{priority: -3}]}",
		"controller: {bands: [{priority: 0, ordering: edf-ordering-policy, queue: fifo}]}",
		"flowControl: {maxBytes: 1.5e3Ki}",
		"flowControl: {priorityBands: [{priority: 0}, {priority: 0}]}",
		"a: &a [*a]",
		"x: &x {y: *x}\ncontroller: *x",
		"controller: {maxRequests: 9223372036854775807}",
		"gate: {saturation: {metricsStalenessThreshold: 1ns}}",
		"controller: {}\x00",
		"controller:\n  bands:\n  - priority: 0\a\n",
		"gateway: {scrapeInterval: 200ms}\ngate: {saturation: {}}",
		"controller: {bands: *none}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse(data)
		if err != nil {
			if file != nil {
				t.Fatalf("Parse returned a file and an error: %v", err)
			}
			checkPlaced(t, data, err)
			return
		}
		c, err := newController(file)
		if err != nil {
			t.Fatalf("Parse accepted\n%s\nbut flowcontrol.New refused it: %v", data, err)
		}
		c.Close()
		if _, ok := file.DynamicBand(-1); ok != (file.Form == FormLLMD) {
			t.Fatalf("DynamicBand ok = %v in form %s", ok, file.Form)
		}
	})
}
