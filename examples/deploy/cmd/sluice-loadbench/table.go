//go:build linux

package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// printTable prints, for each rate and target, the medians over the
// rounds as a Markdown table; what prefixes the latency columns' names.
// The first target is the backend alone, the second the bare proxy; a
// gateway is compared with the target before it.
func printTable(w io.Writer, what string, rates []int, names []string, get func(rate int, name string) []sample) {
	fmt.Fprintf(w, "| rate | target | %[1]sp50 | %[1]sp99 | %[1]sp99.9 | added p50 | added p99 | added p99.9 | CPU/req | allocs/req | non-200 | vs | added p50 ÷ | added p99 ÷ | CPU/req ÷ |\n", what)
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, rate := range rates {
		base := get(rate, names[0])
		for i, name := range names {
			ss := get(rate, name)
			q := func(s sample, q float64) float64 { return ms(s.quantile(q)) }
			added := func(r int, q float64) float64 {
				return ms(ss[r].quantile(q)) - ms(base[r].quantile(q))
			}
			perReq := func(s sample) float64 { return float64(s.cpu/time.Microsecond) / float64(max(s.requests, 1)) }
			allocs := func(s sample) float64 {
				if s.allocs < 0 {
					return -1
				}
				return s.allocs / float64(max(s.requests, 1))
			}
			row := []string{fmt.Sprintf("%d/s", rate), name,
				fmtMs(median(ss, func(_ int, s sample) float64 { return q(s, 0.5) })),
				fmtMs(median(ss, func(_ int, s sample) float64 { return q(s, 0.99) })),
				fmtMs(median(ss, func(_ int, s sample) float64 { return q(s, 0.999) })),
			}
			if i == 0 {
				row = append(row, "—", "—", "—")
			} else {
				for _, qq := range []float64{0.5, 0.99, 0.999} {
					row = append(row, fmtMs(median(ss, func(r int, _ sample) float64 { return added(r, qq) })))
				}
			}
			row = append(row, fmt.Sprintf("%.0f µs", median(ss, func(_ int, s sample) float64 { return perReq(s) })))
			if a := median(ss, func(_ int, s sample) float64 { return allocs(s) }); a >= 0 {
				row = append(row, fmt.Sprintf("%.0f", a))
			} else {
				row = append(row, "—")
			}
			non200 := 0
			for _, s := range ss {
				non200 += s.non200
			}
			row = append(row, fmt.Sprint(non200))
			if i < 2 {
				row = append(row, "—", "—", "—", "—")
			} else {
				ref := get(rate, names[i-1])
				refAdded := func(r int, q float64) float64 { return ms(ref[r].quantile(q)) - ms(base[r].quantile(q)) }
				row = append(row, names[i-1],
					ratio(len(ss), func(r int) float64 { return added(r, 0.5) / refAdded(r, 0.5) }),
					ratio(len(ss), func(r int) float64 { return added(r, 0.99) / refAdded(r, 0.99) }),
					ratio(len(ss), func(r int) float64 { return perReq(ss[r]) / perReq(ref[r]) }))
			}
			fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
		}
	}
}

// ms returns d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func fmtMs(v float64) string { return fmt.Sprintf("%.2f ms", v) }

// median returns the median over the rounds of f.
func median(ss []sample, f func(round int, s sample) float64) float64 {
	v := make([]float64, len(ss))
	for i, s := range ss {
		v[i] = f(i, s)
	}
	return medianOf(v)
}

func medianOf(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// ratio formats the median of f over n rounds, and its range.
func ratio(n int, f func(round int) float64) string {
	v := make([]float64, n)
	for i := range v {
		v[i] = f(i)
	}
	m := medianOf(slices.Clone(v))
	if n == 1 {
		return fmt.Sprintf("%.2f×", m)
	}
	return fmt.Sprintf("%.2f× (%.2f–%.2f)", m, slices.Min(v), slices.Max(v))
}
