//go:build race

package flowcontrol_test

// raceEnabled is true when the race detector runs, which makes the longest
// loops too slow to run whole.
const raceEnabled = true
