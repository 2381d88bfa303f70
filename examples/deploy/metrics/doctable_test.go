package metrics_test

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sluicegate/sluice/examples/deploy/metrics"
)

// family is one side of a row of the package doc's side-by-side table.
type family struct {
	typ    string // "—" when that side has no such family
	labels []string
}

// docTable parses the package doc's side-by-side table: for each metric,
// llm-d-router's side and Sluice's.
func docTable(t *testing.T) (llmd, sluice map[string]family) {
	t.Helper()
	src, err := os.ReadFile("doc.go")
	require.NoError(t, err)
	llmd, sluice = map[string]family{}, map[string]family{}
	in, name := false, ""
	for _, line := range strings.Split(string(src), "\n") {
		body, ok := strings.CutPrefix(line, "//\t")
		if !ok {
			if in {
				break
			}
			continue
		}
		fields := strings.Fields(body)
		if !in {
			in = slices.Equal(fields, []string{"metric", "type", "who", "labels"})
			continue
		}
		if !strings.HasPrefix(body, " ") {
			name, fields = fields[0], fields[1:]
		}
		require.GreaterOrEqual(t, len(fields), 2, "table row %q", body)
		f := family{typ: fields[0], labels: fields[2:]}
		if slices.Equal(f.labels, []string{"-"}) {
			f.labels = nil
		}
		switch fields[1] {
		case "llm-d":
			llmd[name] = f
		case "Sluice":
			sluice[name] = f
		default:
			t.Fatalf("table row %q: who is %q", body, fields[1])
		}
	}
	require.True(t, in, "no side-by-side table in doc.go")
	return llmd, sluice
}

// The package doc's side-by-side table says, for every family a Metrics
// exports, its type and label names as a scrape sees them, and names no
// family it does not export; each row has both sides.
func TestDocTableMatchesTheRegistry(t *testing.T) {
	llmd, sluice := docTable(t)
	for name := range llmd {
		require.Contains(t, sluice, name, "row %s has no Sluice side", name)
	}
	for name := range sluice {
		require.Contains(t, llmd, name, "row %s has no llm-d side", name)
	}

	families, err := everyMetric(t).Gather()
	require.NoError(t, err)
	seen := map[string]bool{}
	for _, mf := range families {
		name := strings.TrimPrefix(mf.GetName(), metrics.Prefix)
		seen[name] = true
		row, ok := sluice[name]
		require.True(t, ok, "%s is registered, and the doc's table does not name it", mf.GetName())
		require.Equal(t, row.typ, strings.ToLower(mf.GetType().String()), "%s: the table's type", name)
		var labels []string
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if !slices.Contains(labels, l.GetName()) {
					labels = append(labels, l.GetName())
				}
			}
		}
		slices.Sort(labels)
		want := slices.Sorted(slices.Values(row.labels))
		require.Equal(t, want, labels, "%s: the table's labels", name)
	}
	for name, row := range sluice {
		if row.typ != "—" {
			require.True(t, seen[name], "the doc's table names %s, which a Metrics does not export", name)
		} else {
			require.Empty(t, row.labels, "%s: a family Sluice lacks has no labels", name)
		}
	}
}
