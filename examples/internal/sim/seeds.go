package sim

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"slices"
	"sync"
)

// Spread is the minimum, median and maximum of one figure over seeds: what
// a table prints when one run per seed is too little to go by.
type Spread struct{ Min, Median, Max float64 }

// SpreadOf returns the spread of values. The median of an even count is
// the mean of the two middle values, so it does not lean towards either
// half; the zero Spread stands for no values. values is left as it was.
func SpreadOf(values []float64) Spread {
	n := len(values)
	if n == 0 {
		return Spread{}
	}
	s := slices.Clone(values)
	slices.Sort(s)
	median := s[n/2]
	if n%2 == 0 {
		median = (s[n/2-1] + s[n/2]) / 2
	}
	return Spread{Min: s[0], Median: median, Max: s[n-1]}
}

// SeedRange returns the seeds from, from+1, ..., to (none when to < from).
func SeedRange(from, to uint64) []uint64 {
	if to < from {
		return nil
	}
	var seeds []uint64
	for s := from; ; s++ {
		seeds = append(seeds, s)
		if s == to { // checked before s++, which would wrap at the largest uint64
			return seeds
		}
	}
}

// SeedRangeFlags defines the flags -from (the first seed, 1 by default)
// and -to (the last, 20) and returns a function that, once the flags are
// parsed, returns SeedRange(from, to), or ends the command cmd with a
// message and exit status 2 unless 1 <= from <= to.
func SeedRangeFlags(cmd string) func() []uint64 {
	from := flag.Uint64("from", 1, "first seed")
	to := flag.Uint64("to", 20, "last seed")
	return func() []uint64 {
		if *from == 0 || *to < *from {
			fmt.Fprintf(os.Stderr, "%s: -from %d and -to %d: want 1 <= from <= to\n", cmd, *from, *to)
			os.Exit(2)
		}
		return SeedRange(*from, *to)
	}
}

// OverSeeds calls run once per seed and returns the results in the order of
// seeds. The runs are independent simulations, spread over the CPUs; each
// result lands in its own place, so the answer is the same whatever the
// schedule. The error is that of the first failing seed in that order.
func OverSeeds[T any](seeds []uint64, run func(seed uint64) (T, error)) ([]T, error) {
	out := make([]T, len(seeds))
	err := Parallel(len(seeds), func(i int) error {
		var err error
		out[i], err = run(seeds[i])
		return err
	})
	return out, err
}

// Parallel calls run(i) for i in [0, n), spread over GOMAXPROCS
// goroutines, and returns when every call has. The error is that of the
// lowest i that failed, so it too is independent of the schedule.
func Parallel(n int, run func(i int) error) error {
	errs := make([]error, n)
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), max(n, 1)) {
		wg.Go(func() {
			for i := range next {
				errs[i] = run(i)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
