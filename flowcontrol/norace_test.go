//go:build !race

package flowcontrol_test

const raceEnabled = false
