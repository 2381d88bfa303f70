//go:build race

package main

// raceEnabled: the race detector slows the simulation about tenfold.
const raceEnabled = true
