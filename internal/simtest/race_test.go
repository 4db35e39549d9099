//go:build race

package simtest

// raceEnabled: the race detector makes a seed about ten times slower.
const raceEnabled = true
