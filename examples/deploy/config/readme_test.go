package config

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluicegate/sluice/capacity"
	"github.com/sluicegate/sluice/ordering"
)

// The llm-d file the deploy module's README shows loads unchanged, and
// means what the README says of it.
func TestREADMEExampleLoads(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var example string
	for _, block := range strings.Split(string(readme), "```yaml\n")[1:] {
		body, _, _ := strings.Cut(block, "```")
		if strings.Contains(body, "kind: EndpointPickerConfig") {
			example = body
			break
		}
	}
	if example == "" {
		t.Fatal("examples/deploy/README.md shows no llm-d EndpointPickerConfig in a yaml block")
	}
	f, err := Parse([]byte(example))
	if err != nil {
		t.Fatalf("the README's llm-d file: %v", err)
	}
	if f.Form != FormLLMD {
		t.Fatalf("form %v, want llm-d's", f.Form)
	}
	if f.Flow.RequestCapacity != capacity.Bounded(2000) || f.Flow.ByteCapacity != capacity.Bounded(8<<30) ||
		f.Flow.DefaultTTL != 45*time.Second || f.Flow.NoEndpointsTTL != 20*time.Second {
		t.Errorf("controller-wide settings %+v: want 2k requests, 8Gi, 45s and 20s", f.Flow)
	}
	var found bool
	for _, b := range f.Flow.Bands {
		if b.Priority == 100 {
			found = true
			if b.RequestCapacity != capacity.Bounded(400) || b.Policy == nil || b.Policy.TypeName() != ordering.EDF().TypeName() ||
				b.Fairness == nil || b.Fairness.TypeName() != "round-robin-fairness-policy" {
				t.Errorf("band 100 = %+v: want 400 requests, EDF, round robin", b)
			}
		}
	}
	if !found {
		t.Error("band 100 missing")
	}
	if f.Gate.Concurrency == nil {
		t.Error("the concurrency detector the file names was not read")
	}
	mustNew(t, f)
}
