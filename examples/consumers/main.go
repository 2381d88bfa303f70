// Command consumers compares how upstream dispatchers read a Sluice
// router's signals.
package main

import (
	"flag"
	"fmt"
	"os"
)

func main() {
	from := flag.Uint64("from", 1, "first seed")
	to := flag.Uint64("to", 20, "last seed")
	flag.Parse()
	c, err := Compare(Scenarios, Variants, seedRange(*from, *to))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	c.Print(os.Stdout)
}
