// Package simtest holds what the simulations' tests check alike.
package simtest

import (
	"bytes"
	"testing"
)

// SameSeedSameBytes fails t unless print, called twice with seed, prints
// the same bytes both times, and other bytes with seed+1: the printout is
// a function of the seed, and of the seed only.
func SameSeedSameBytes(t testing.TB, seed uint64, print func(seed uint64) []byte) {
	t.Helper()
	first, second := print(seed), print(seed)
	if !bytes.Equal(first, second) {
		t.Fatalf("seed %d printed two different tables:\n%s\n%s", seed, first, second)
	}
	if bytes.Equal(first, print(seed+1)) {
		t.Fatalf("seeds %d and %d printed the same table:\n%s", seed, seed+1, first)
	}
}
